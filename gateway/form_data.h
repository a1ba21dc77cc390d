// A streaming reader of multipart/form-data bodies (RFC 7578), as browsers
// send HTML form uploads (S3's POST Object). The fields before the file are
// collected; the file's bytes are passed on as they arrive and never held
// beyond the delimiter's length (which a piece boundary may split); what
// follows the file is read and dropped, as S3 does.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>

#include "gateway/request.h"
#include "util/bytes.h"

namespace keel::gateway {

// The part named "file" (any case): its filename parameter and its own
// Content-Type (which S3 does not store: the Content-Type field is the object's).
struct FormFile {
  std::string filename;
  std::string content_type;
};

class FormDataReader {
 public:
  // `fields`: the fields before the file, names lower case (S3 reads them
  // in any case), in the order sent. Throws what the callbacks throw.
  using FileBegins = std::function<void(const NameValues& fields, const FormFile& file)>;
  using FileData = std::function<void(ByteView data)>;

  // `max_fields_bytes`: the most the fields before the file may hold (names
  // and values), S3Error MaxPostPreDataLengthExceededError beyond it.
  FormDataReader(std::string boundary, FileBegins file_begins, FileData file_data, size_t max_fields_bytes);

  // S3Error MalformedPOSTRequest when the body is not multipart/form-data.
  void feed(ByteView data);
  // The body has ended: S3Error MalformedPOSTRequest when it ended inside
  // the file or a field, IncorrectNumberOfFilesInPostRequest without a file.
  void finish();

 private:
  enum class State { kPreamble, kAfterDelimiter, kHeaders, kField, kFile, kEpilogue };
  // Consumes what it can of pending_; false when it needs more bytes.
  bool step();
  void part_headers(std::string_view block);

  std::string delimiter_;  // "\r\n--" + boundary
  FileBegins file_begins_;
  FileData file_data_;
  size_t max_fields_bytes_;
  State state_ = State::kPreamble;
  std::string pending_;
  NameValues fields_;
  size_t fields_bytes_ = 0;
  std::string field_name_;
  bool file_seen_ = false;
};

// The boundary of a "multipart/form-data; boundary=..." Content-Type. A POST
// of another type: S3Error PreconditionFailed, as S3 answers it.
std::string form_boundary(std::string_view content_type);

}  // namespace keel::gateway
