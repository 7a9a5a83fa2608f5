// The pybind11 module arrayds._native: one bind_* call per file of this folder. The
// bindings convert arguments, allocate the Python objects, and release the GIL around
// all I/O, decoding and encoding; the engine itself (util/, riegeli/, compress/,
// arrayrecord/) knows nothing about Python.
#include <pybind11/pybind11.h>

#include "python/exceptions.h"
#include "python/hash.h"
#include "python/options.h"
#include "python/pooled_buffer.h"
#include "python/py_reader.h"
#include "python/py_writer.h"

PYBIND11_MODULE(_native, m) {
  using namespace arrayds::python;
  m.doc() = "arrayds native ArrayRecord engine (internal; use arrayds.ArrayRecordReader/Writer)";
  bind_exceptions(m);
  bind_codecs(m);
  bind_hash(m);
  bind_options(m);
  bind_writer(m);
  bind_pooled_buffer(m);
  bind_reader(m);
}
