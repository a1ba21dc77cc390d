#include "gateway/form_data.h"

#include "gateway/s3_error.h"
#include "util/text.h"

namespace keel::gateway {

namespace {

constexpr size_t kMaxBoundary = 70;        // RFC 2046
constexpr size_t kMaxPartHeaders = 16384;  // a part's header block; browsers send a few hundred bytes

[[noreturn]] void not_form_data(const std::string& why) {
  throw S3Error("MalformedPOSTRequest",
                "The body of your POST request is not well-formed multipart/form-data: " + why);
}

// The value of `name` in a header's "; name=value" parameters (quoted or
// not), or nullopt. Quoted values keep backslash escapes undone, as browsers
// escape '"' and '\' in file names.
std::optional<std::string> parameter(std::string_view header, std::string_view name) {
  size_t at = header.find(';');
  while (at != std::string_view::npos) {
    std::string_view rest = trim_blanks(header.substr(at + 1));
    const size_t equals = rest.find('=');
    const size_t semicolon = rest.find(';');
    if (equals == std::string_view::npos || (semicolon != std::string_view::npos && semicolon < equals)) {
      at = semicolon == std::string_view::npos ? semicolon : header.size() - rest.size() + semicolon;
      continue;
    }
    const bool wanted = ascii_lower(trim_blanks(rest.substr(0, equals))) == name;
    rest = rest.substr(equals + 1);
    std::string value;
    size_t end = 0;
    if (!rest.empty() && rest.front() == '"') {
      end = 1;
      while (end < rest.size() && rest[end] != '"') {
        if (rest[end] == '\\' && end + 1 < rest.size()) ++end;
        value += rest[end++];
      }
      if (end == rest.size()) not_form_data("an unterminated quoted parameter");
      ++end;
    } else {
      end = std::min(rest.find(';'), rest.size());
      value = std::string(trim_blanks(rest.substr(0, end)));
    }
    if (wanted) return value;
    const size_t next = rest.find(';', end);
    at = next == std::string_view::npos ? next : header.size() - rest.size() + next;
  }
  return std::nullopt;
}

}  // namespace

std::string form_boundary(std::string_view content_type) {
  const std::string_view type = trim_blanks(content_type.substr(0, content_type.find(';')));
  if (ascii_lower(type) != "multipart/form-data") {
    throw S3Error("PreconditionFailed", "Bucket POST must be of the enclosure-type multipart/form-data");
  }
  const auto boundary = parameter(content_type, "boundary");
  if (!boundary || boundary->empty() || boundary->size() > kMaxBoundary) {
    not_form_data("the Content-Type names no boundary of 1 to 70 characters");
  }
  return *boundary;
}

FormDataReader::FormDataReader(std::string boundary, FileBegins file_begins, FileData file_data,
                               size_t max_fields_bytes)
    : delimiter_("\r\n--" + boundary),
      file_begins_(std::move(file_begins)),
      file_data_(std::move(file_data)),
      max_fields_bytes_(max_fields_bytes),
      // The first delimiter may open the body: it is found as "\r\n--" too.
      pending_("\r\n") {}

void FormDataReader::feed(ByteView data) {
  if (state_ == State::kEpilogue) return;
  pending_.append(as_chars(data));
  while (step()) {
  }
}

bool FormDataReader::step() {
  switch (state_) {
    case State::kPreamble: {
      const size_t at = pending_.find(delimiter_);
      if (at == std::string::npos) {
        // Keep what could be the start of a split delimiter.
        if (pending_.size() >= delimiter_.size()) pending_.erase(0, pending_.size() - delimiter_.size() + 1);
        return false;
      }
      pending_.erase(0, at + delimiter_.size());
      state_ = State::kAfterDelimiter;
      return true;
    }
    case State::kAfterDelimiter: {
      // "--" closes the body; otherwise optional blanks (transport padding) and CRLF.
      if (pending_.size() < 2) return false;
      if (pending_.compare(0, 2, "--") == 0) {
        if (!file_seen_) throw S3Error("IncorrectNumberOfFilesInPostRequest", "POST requires exactly one file upload per request.");
        state_ = State::kEpilogue;
        return false;
      }
      const size_t crlf = pending_.find("\r\n");
      if (crlf == std::string::npos) {
        if (pending_.size() > kMaxBoundary) not_form_data("a delimiter line that does not end");
        return false;
      }
      if (!trim_blanks(std::string_view(pending_).substr(0, crlf)).empty()) not_form_data("text after a delimiter");
      pending_.erase(0, crlf + 2);
      state_ = State::kHeaders;
      return true;
    }
    case State::kHeaders: {
      // A part without headers starts with the blank line at once.
      const size_t end = pending_.starts_with("\r\n") ? 0 : pending_.find("\r\n\r\n");
      if (end == std::string::npos) {
        if (pending_.size() > kMaxPartHeaders) not_form_data("a part's headers exceed 16 KiB");
        return false;
      }
      const std::string block = pending_.substr(0, end);
      pending_.erase(0, end == 0 ? 2 : end + 4);
      part_headers(block);
      return true;
    }
    case State::kField: {
      const size_t at = pending_.find(delimiter_);
      // Without the delimiter yet, all but its possible start is value.
      const size_t value_bytes = at == std::string::npos ? pending_.size() - std::min(pending_.size(), delimiter_.size()) : at;
      if (fields_bytes_ + field_name_.size() + value_bytes > max_fields_bytes_) {
        throw S3Error("MaxPostPreDataLengthExceededError",
                      "Your POST request fields preceding the upload file were too large.");
      }
      if (at == std::string::npos) return false;
      fields_bytes_ += field_name_.size() + at;
      fields_.emplace_back(std::move(field_name_), pending_.substr(0, at));
      pending_.erase(0, at + delimiter_.size());
      state_ = State::kAfterDelimiter;
      return true;
    }
    case State::kFile: {
      const size_t at = pending_.find(delimiter_);
      if (at != std::string::npos) {
        if (at > 0) file_data_(as_bytes(std::string_view(pending_).substr(0, at)));
        // S3 ignores the fields after the file: the rest of the body is dropped unread.
        pending_.clear();
        state_ = State::kEpilogue;
        return false;
      }
      // Pass on all but what could be the start of a split delimiter.
      if (pending_.size() >= delimiter_.size()) {
        const size_t ready = pending_.size() - delimiter_.size() + 1;
        file_data_(as_bytes(std::string_view(pending_).substr(0, ready)));
        pending_.erase(0, ready);
      }
      return false;
    }
    case State::kEpilogue:
      return false;
  }
  return false;
}

void FormDataReader::part_headers(std::string_view block) {
  std::optional<std::string> name;
  std::optional<std::string> filename;
  std::string content_type;
  while (!block.empty()) {
    const size_t end = std::min(block.find("\r\n"), block.size());
    const std::string_view line = block.substr(0, end);
    block = end == block.size() ? std::string_view() : block.substr(end + 2);
    const size_t colon = line.find(':');
    if (colon == std::string_view::npos) not_form_data("a part header without ':'");
    const std::string header = ascii_lower(trim_blanks(line.substr(0, colon)));
    const std::string_view value = trim_blanks(line.substr(colon + 1));
    if (header == "content-disposition") {
      if (ascii_lower(trim_blanks(value.substr(0, value.find(';')))) != "form-data") {
        not_form_data("a part that is not form-data");
      }
      name = parameter(value, "name");
      filename = parameter(value, "filename");
    } else if (header == "content-type") {
      content_type = std::string(value);
    }
  }
  if (!name) not_form_data("a part without a Content-Disposition name");
  field_name_ = ascii_lower(*name);
  if (field_name_ != "file") {
    state_ = State::kField;
    return;
  }
  file_seen_ = true;
  state_ = State::kFile;
  file_begins_(fields_, FormFile{filename.value_or(""), content_type});
}

void FormDataReader::finish() {
  if (state_ == State::kEpilogue) return;
  if (!file_seen_ && (state_ == State::kPreamble || state_ == State::kAfterDelimiter)) {
    throw S3Error("IncorrectNumberOfFilesInPostRequest", "POST requires exactly one file upload per request.");
  }
  not_form_data(state_ == State::kFile ? "the body ended inside the file" : "the body ended inside a part");
}

}  // namespace keel::gateway
