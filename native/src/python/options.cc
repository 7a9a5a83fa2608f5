#include "python/options.h"

#include <string>

#include "arrayrecord/options.h"
#include "compress/compressor.h"

namespace arrayds::python {

void bind_codecs(py::module_& m) {
  m.def("codecs", [] {
    py::dict d;
    d["uncompressed"] = true;
    d["zstd"] = codec_available(Compression::kZstd);
    d["brotli"] = codec_available(Compression::kBrotli);
    d["snappy"] = codec_available(Compression::kSnappy);
    return d;
  }, "Which codecs this build can read and write.");
}

void bind_options(py::module_& m) {
  m.def("canonical_writer_options",
        [](const std::string& options) { return WriterOptions::parse(options).canonical(); },
        py::arg("options"),
        "The canonical options string the writer stores for `options` (ValueError if invalid).");
  m.def("check_reader_options", [](const std::string& options) { ReaderOptions::parse(options); },
        py::arg("options"), "Raises ValueError if `options` is not a valid reader options string.");
}

}  // namespace arrayds::python
