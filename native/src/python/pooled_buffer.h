// _native.PooledBuffer and pooled_buffer(): writable buffers over blocks of the
// process-wide BufferPool (util/buffer_pool.h).
#pragma once

#include <pybind11/pybind11.h>

namespace arrayds::python {

namespace py = pybind11;

// PooledBuffer, pooled_buffer, _buffer_pool_idle_bytes.
void bind_pooled_buffer(py::module_& m);

}  // namespace arrayds::python
