// pstrain-data: image datasets as TFRecords or class folders (docs/DATA.md).
//
//   pstrain-data convert --source fashion_mnist|image_folder --path DIR --out DIR
//                        [--format tfrecord|folder] [--image_format jpeg|png] [--quality 95]
//                        [--shards 4] [--validation_shards 1] [--first_label 0]
//   pstrain-data validate --files 'DIR/train-*' [--decode]
//
// Exit codes: 0 done (validate: no bad record), 1 failed (validate: bad
// records found, each printed with its file and offset), 2 bad usage.
#include <gflags/gflags.h>

#include <iostream>
#include <string>

#include "common/command_line/command_line.h"
#include "tools/data/convert.h"
#include "tools/data/validate.h"

DEFINE_string(source, "", "convert: fashion_mnist or image_folder");
DEFINE_string(path, "", "convert: the source's directory");
DEFINE_string(out, "", "convert: the output directory (created; must hold no TFRecords yet)");
DEFINE_string(format, "tfrecord", "convert: tfrecord, or folder (class folders of image files; fashion_mnist only)");
DEFINE_int32(first_label, 0, "convert --format tfrecord: the label stored for class 0 (1: ImageNet's 1-based labels)");
DEFINE_string(image_format, "jpeg", "convert --source fashion_mnist: jpeg or png");
DEFINE_int32(quality, 95, "convert: JPEG quality, 1..100");
DEFINE_int32(shards, 4, "convert: training shards");
DEFINE_int32(validation_shards, 1, "convert: validation shards");
DEFINE_string(files, "", "validate: glob of the TFRecord files");
DEFINE_bool(decode, false, "validate: decode every image fully, not only its header");

namespace {

int Usage() {
  std::cerr << "usage: pstrain-data convert --source fashion_mnist|image_folder --path DIR --out DIR [...]\n"
               "       pstrain-data validate --files 'DIR/train-*' [--decode]\n";
  return 2;
}

int RunConvert() {
  if (FLAGS_path.empty() || FLAGS_out.empty()) return Usage();
  pstrain::data_tool::ConvertOptions o;
  o.source = FLAGS_source;
  o.path = FLAGS_path;
  o.out = FLAGS_out;
  o.format = FLAGS_format;
  o.first_label = FLAGS_first_label;
  o.image_format = FLAGS_image_format;
  o.jpeg_quality = FLAGS_quality;
  o.train_shards = FLAGS_shards;
  o.validation_shards = FLAGS_validation_shards;
  absl::StatusOr<pstrain::data_tool::ConvertReport> r = pstrain::data_tool::Convert(o);
  if (!r.ok()) {
    std::cerr << "pstrain-data convert: " << r.status().message() << "\n";
    return 1;
  }
  std::cout << "pstrain-data: " << r->train_examples << " training and " << r->validation_examples
            << " validation examples of " << r->num_classes << " classes, " << r->bytes_written << " bytes in "
            << FLAGS_out << "\n";
  return 0;
}

int RunValidate() {
  if (FLAGS_files.empty()) return Usage();
  absl::StatusOr<pstrain::data_tool::ValidateReport> r = pstrain::data_tool::Validate({FLAGS_files, FLAGS_decode});
  if (!r.ok()) {
    std::cerr << "pstrain-data validate: " << r.status().message() << "\n";
    return 1;
  }
  std::cout << pstrain::data_tool::FormatValidateReport(*r);
  return r->problems.empty() ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  pstrain::ParseCommandLine({.program = "pstrain-data",
                             .usage = "convert --source fashion_mnist|image_folder --path DIR --out DIR [...]\n"
                                      "       pstrain-data validate --files 'DIR/train-*' [--decode]\n"
                                      "Image datasets as TFRecords or class folders, and checks of TFRecord sets "
                                      "(docs/DATA.md).",
                             .own_files = {"data_main"},
                             .shows = nullptr},
                            &argc, &argv);
  if (argc != 2) return Usage();
  const std::string command = argv[1];
  if (command == "convert") return RunConvert();
  if (command == "validate") return RunValidate();
  return Usage();
}
