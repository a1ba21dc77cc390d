// S3's POST Object: a browser-based upload with an HTML form (form_data.h),
// anonymous or signed by its policy document (post_policy.h) with Version 4
// or Version 2. The form becomes a PutObject of the user it authenticates,
// so the access checks (bucket policy, ACLs, the append grant), Object Lock
// defaults, encryption and the ACL it asks for are PutObject's, on raw and
// dedupe buckets alike.
#include <algorithm>

#include "gateway/form_data.h"
#include "gateway/post_policy.h"
#include "gateway/s3_api.h"
#include "gateway/s3_api_util.h"
#include "gateway/sigv2_verify.h"
#include "gateway/tagging.h"
#include "gateway/xml_reader.h"
#include "targets/s3/sigv4.h"
#include "util/xml.h"

namespace keel::gateway {

namespace {

using keel::targets::s3::uri_encode;

// The fields before the file, names and values together (the policy is the
// largest: a few KiB of base64). S3 answers MaxPostPreDataLengthExceededError beyond it.
constexpr size_t kMaxFormFields = 64 * 1024;

std::optional<std::string> field(const NameValues& fields, std::string_view name) {
  const auto it = std::find_if(fields.begin(), fields.end(), [&](const auto& f) { return f.first == name; });
  if (it == fields.end()) return std::nullopt;
  return it->second;
}

std::string required(const NameValues& fields, std::string_view name) {
  auto value = field(fields, name);
  if (!value) {
    throw S3Error("InvalidArgument", "Bucket POST must contain a field named '" + std::string(name) +
                                         "'. If it is specified, please check the order of the fields.");
  }
  return *value;
}

// The form fields that S3 reads as the PutObject headers of the same names.
bool becomes_header(std::string_view name) {
  static constexpr std::string_view kHeaders[] = {
      "cache-control", "content-type", "content-disposition", "content-encoding", "content-language", "expires",
      "x-amz-storage-class", "x-amz-website-redirect-location", "x-amz-object-lock-mode",
      "x-amz-object-lock-retain-until-date", "x-amz-object-lock-legal-hold"};
  return name.starts_with("x-amz-meta-") || name.starts_with("x-amz-grant-") ||
         name.starts_with("x-amz-server-side-encryption") || name.starts_with("x-amz-checksum-") ||
         std::find(std::begin(kHeaders), std::end(kHeaders), name) != std::end(kHeaders);
}

// Who the form acts for: Version 4 fields (x-amz-credential, x-amz-signature),
// Version 2 ones (AWSAccessKeyId, signature), or none (anonymous).
const User& form_user(const NameValues& fields, const std::vector<User>& users) {
  if (field(fields, "x-amz-credential") || field(fields, "x-amz-signature") || field(fields, "x-amz-algorithm")) {
    const std::string algorithm = required(fields, "x-amz-algorithm");
    if (algorithm != "AWS4-HMAC-SHA256") {
      throw S3Error("InvalidArgument", "x-amz-algorithm must be AWS4-HMAC-SHA256, not '" + algorithm + "'");
    }
    required(fields, "x-amz-date");
    return verify_post_form_v4(required(fields, "x-amz-credential"), required(fields, "policy"),
                               required(fields, "x-amz-signature"), users);
  }
  if (field(fields, "awsaccesskeyid") || field(fields, "signature")) {
    return verify_post_form_v2(required(fields, "awsaccesskeyid"), required(fields, "policy"),
                               required(fields, "signature"), users);
  }
  return anonymous_user();
}

// The form's tagging field (a <Tagging> document) as an x-amz-tagging header.
std::string tagging_header(const std::string& document) {
  std::string header;
  for (const auto& [key, value] : parse_tagging_document(read_xml_body(document))) {
    header += (header.empty() ? "" : "&") + uri_encode(key, true) + "=" + uri_encode(value, true);
  }
  return header;
}

// The upload a form amounts to, from its file part on.
struct PostUpload {
  S3Request request;  // the PutObject
  Authentication auth;
  std::optional<PostPolicy> policy;
  std::unique_ptr<RequestBody> put;  // the PutObject's body
  uint64_t size = 0;
  std::string success_status;
  std::string redirect;
};

class PostBody final : public RequestBody {
 public:
  PostBody(FormDataReader reader, std::function<Response()> done) : reader_(std::move(reader)), done_(std::move(done)) {}
  void write(ByteView data) override { reader_.feed(data); }
  Response finish() override {
    reader_.finish();
    return done_();
  }

 private:
  FormDataReader reader_;
  std::function<Response()> done_;
};

// The answer to a stored upload, as success_action_redirect or
// success_action_status ask (204 by default, 201 with a PostResponse document).
Response post_response(Response put, const PostUpload& upload) {
  const S3Request& r = upload.request;
  std::string etag;
  for (const auto& [name, value] : put.headers) {
    if (name == "etag") etag = value;
  }
  const std::string object_url = std::string(r.secure ? "https://" : "http://") + r.host + "/" +
                                 (r.virtual_hosted ? "" : r.bucket + "/") + uri_encode(r.key, false);
  Response answer;
  answer.headers = std::move(put.headers);
  if (upload.redirect.starts_with("http://") || upload.redirect.starts_with("https://")) {
    answer.status = 303;
    answer.headers.emplace_back("location", upload.redirect + (upload.redirect.find('?') == std::string::npos ? "?" : "&") +
                                                "bucket=" + uri_encode(r.bucket, true) + "&key=" + uri_encode(r.key, true) +
                                                "&etag=" + uri_encode(etag, true));
    return answer;
  }
  answer.headers.emplace_back("location", object_url);
  if (upload.success_status == "200") return answer;
  if (upload.success_status == "201") {
    XmlWriter xml;
    // No namespace: S3 sends none on PostResponse, and form pages read it as is.
    xml.open("PostResponse")
        .element("Location", object_url)
        .element("Bucket", r.bucket)
        .element("Key", r.key)
        .element("ETag", etag);
    Response document = xml_response(xml.finish(), 201);
    document.headers.insert(document.headers.end(), answer.headers.begin(), answer.headers.end());
    return document;
  }
  answer.status = 204;
  return answer;
}

}  // namespace

std::unique_ptr<RequestBody> S3Api::post_object(const Call& call) {
  const std::string boundary = form_boundary(call.request.header("content-type"));
  {
    std::lock_guard lock(mutex_);
    if (!buckets_.contains(call.request.bucket)) {
      throw S3Error("NoSuchBucket", "the bucket '" + call.request.bucket + "' does not exist");
    }
  }
  auto upload = std::make_shared<PostUpload>();
  auto file_begins = [this, upload, outer = call.request](const NameValues& form, const FormFile& file) {
    NameValues fields;
    // The request names the bucket: a policy's bucket condition is checked against it, not a form field.
    std::copy_if(form.begin(), form.end(), std::back_inserter(fields), [](const auto& f) { return f.first != "bucket"; });
    const User& user = form_user(fields, config_.users);
    std::string key = required(fields, "key");
    for (size_t at = key.find("${filename}"); at != std::string::npos; at = key.find("${filename}", at + file.filename.size())) {
      key.replace(at, 11, file.filename);
    }
    if (key.empty()) throw S3Error("InvalidArgument", "the key field is empty");
    for (auto& [name, value] : fields) {
      if (name == "key") value = key;
    }
    fields.emplace_back("bucket", outer.bucket);
    if (const auto policy = field(fields, "policy")) {
      upload->policy = PostPolicy::parse(*policy);
      upload->policy->check(fields, clock_());
    }
    S3Request& put = upload->request;
    put.method = "PUT";
    put.host = outer.host;
    put.bucket = outer.bucket;
    put.key = key;
    put.path = "/" + put.bucket + "/" + key;
    put.target = "/" + put.bucket + "/" + uri_encode(key, false);
    put.virtual_hosted = outer.virtual_hosted;
    put.client_address = outer.client_address;
    put.secure = outer.secure;
    for (const auto& [name, value] : fields) {
      if (becomes_header(name)) put.headers.emplace_back(name, value);
    }
    if (const auto acl = field(fields, "acl")) put.headers.emplace_back("x-amz-acl", *acl);
    if (const auto tagging = field(fields, "tagging")) put.headers.emplace_back("x-amz-tagging", tagging_header(*tagging));
    upload->auth.user = &user;
    upload->success_status = field(fields, "success_action_status").value_or("");
    upload->redirect = field(fields, "success_action_redirect").value_or(field(fields, "redirect").value_or(""));

    Call put_call{put, user, upload->auth};
    admit(put_call, Operation::kPutObject);
    Exchange exchange{{}, put_object(put_call)};
    if (put_call.requested_acl) {
      exchange = apply_acl_after(std::move(exchange), put_call, Operation::kPutObject, *put_call.requested_acl);
    }
    upload->put = std::move(exchange.body);
  };
  auto file_data = [upload](ByteView data) {
    upload->size += data.size();
    // Refused as the bytes come, not once they are all stored.
    if (upload->policy && upload->size > upload->policy->max_size()) upload->policy->check_size(upload->size);
    upload->put->write(data);
  };
  auto done = [upload] {
    if (upload->policy) upload->policy->check_size(upload->size);
    return post_response(upload->put->finish(), *upload);
  };
  return std::make_unique<PostBody>(FormDataReader(boundary, std::move(file_begins), std::move(file_data), kMaxFormFields),
                                    std::move(done));
}

}  // namespace keel::gateway
