// The whole public API of libsynk in one include.
#pragma once

#include "synk/agreement.h"
#include "synk/communicator.h"
#include "synk/data.h"
#include "synk/device.h"
#include "synk/distribute.h"
#include "synk/error.h"
#include "synk/function.h"
#include "synk/key_value.h"
#include "synk/node_buffer.h"
#include "synk/request.h"
#include "synk/shared.h"
#include "synk/shared_list.h"
#include "synk/types.h"
#include "synk/version.h"
