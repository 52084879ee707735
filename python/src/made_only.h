// An object of a bound class whose __init__ never ran (`synk.Communicator.__new__(...)` alone)
// holds no C++ object, and pybind11 would hand its methods fresh uninitialised memory as one (a
// segmentation fault, or a call on garbage). The casters below raise a TypeError instead.
// SYNK_PYTHON_MADE_ONLY(T) goes at global scope in every file that casts T, before its first
// use there, as any specialisation of pybind11's type_caster must.
#pragma once

#include <string>

#include <pybind11/pybind11.h>

#include "synk/communicator.h"

namespace synk::python {

// The TypeError for `src`, an object whose __init__ never ran.
[[noreturn]] inline void throw_never_made(pybind11::handle src) {
  const std::string name =
      pybind11::str(pybind11::type::of(src).attr("__name__")).cast<std::string>();
  throw pybind11::type_error("this " + name + " was made by " + name +
                             ".__new__ alone, without __init__: it holds nothing to use");
}

template <typename T>
class MadeOnlyCaster : public pybind11::detail::type_caster_base<T> {
 public:
  bool load(pybind11::handle src, bool convert) {
    if (src && !src.is_none() && pybind11::isinstance<T>(src)) {
      auto* inst = reinterpret_cast<pybind11::detail::instance*>(src.ptr());
      const auto vh = inst->get_value_and_holder(pybind11::detail::get_type_info(typeid(T)));
      if (!vh.holder_constructed()) throw_never_made(src);
    }
    return pybind11::detail::type_caster_base<T>::load(src, convert);
  }
};

}  // namespace synk::python

#define SYNK_PYTHON_MADE_ONLY(T)                                                 \
  namespace pybind11::detail {                                                   \
  template <>                                                                    \
  class type_caster<T> : public synk::python::MadeOnlyCaster<T> {};              \
  }

SYNK_PYTHON_MADE_ONLY(synk::Communicator)
