"""Minimal S3 client for tests (Python 3 standard library only): AWS Signature Version 4,
path-style addressing, one kept-alive connection. Enough to check what an S3 server holds
without awscli or boto3.

  s3 = S3Client.from_env()                 # S3_ENDPOINT (or an explicit endpoint), S3_ACCESS_KEY, ...
  s3.request("PUT", "/bucket")             # -> Response(status, headers, body)
  s3.request("PUT", "/bucket/key", body=b"data", headers={"Content-MD5": md5_base64(b"data")})
"""

import base64
import datetime
import hashlib
import hmac
import http.client
import os
import ssl
import urllib.parse
from dataclasses import dataclass

EMPTY_SHA256 = hashlib.sha256(b"").hexdigest()
UNSIGNED_PAYLOAD = "UNSIGNED-PAYLOAD"


@dataclass
class Response:
    status: int
    headers: dict  # lower-case names
    body: bytes


def md5_base64(data):
    return base64.b64encode(hashlib.md5(data).digest()).decode()


def _hmac(key, text):
    return hmac.new(key, text.encode(), hashlib.sha256).digest()


def _quote(text, safe="-_.~"):
    return urllib.parse.quote(text, safe=safe)


class S3Client:
    def __init__(self, endpoint, access_key, secret_key, region="us-east-1", ca_file=None,
                 timeout=30):
        url = urllib.parse.urlsplit(endpoint)
        if url.scheme not in ("http", "https") or not url.hostname:
            raise ValueError(f"S3 endpoint {endpoint!r}: expected http(s)://HOST:PORT")
        self.scheme, self.netloc = url.scheme, url.netloc
        self.access_key, self.secret_key, self.region = access_key, secret_key, region
        self.ca_file, self.timeout = ca_file, timeout
        self.conn = None

    @classmethod
    def from_env(cls, endpoint=None, **kwargs):
        return cls(endpoint or os.environ["S3_ENDPOINT"], os.environ["S3_ACCESS_KEY"],
                   os.environ["S3_SECRET_KEY"], os.environ.get("S3_REGION", "us-east-1"),
                   ca_file=os.environ.get("S3_CA_FILE"), **kwargs)

    def close(self):
        if self.conn:
            self.conn.close()
            self.conn = None

    def _connection(self):
        if self.conn is None:
            if self.scheme == "https":
                context = ssl.create_default_context(cafile=self.ca_file)
                self.conn = http.client.HTTPSConnection(self.netloc, timeout=self.timeout,
                                                        context=context)
            else:
                self.conn = http.client.HTTPConnection(self.netloc, timeout=self.timeout)
        return self.conn

    def sign(self, method, path, query, headers, payload_hash, now=None):
        """Adds x-amz-date, x-amz-content-sha256 and Authorization to headers (SigV4)."""
        now = now or datetime.datetime.now(datetime.timezone.utc)
        amz_date = now.strftime("%Y%m%dT%H%M%SZ")
        headers.update({"host": self.netloc, "x-amz-date": amz_date,
                        "x-amz-content-sha256": payload_hash})
        names = sorted(k.lower() for k in headers)
        values = {k.lower(): " ".join(str(v).split()) for k, v in headers.items()}
        canonical = "\n".join([
            method, _quote(path, safe="/-_.~"),
            "&".join(f"{_quote(k)}={_quote(v)}" for k, v in sorted(query.items())),
            "".join(f"{n}:{values[n]}\n" for n in names), ";".join(names), payload_hash])
        scope = f"{amz_date[:8]}/{self.region}/s3/aws4_request"
        to_sign = "\n".join(["AWS4-HMAC-SHA256", amz_date, scope,
                             hashlib.sha256(canonical.encode()).hexdigest()])
        key = ("AWS4" + self.secret_key).encode()
        for part in (amz_date[:8], self.region, "s3", "aws4_request"):
            key = _hmac(key, part)
        signature = hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()
        headers["Authorization"] = (f"AWS4-HMAC-SHA256 Credential={self.access_key}/{scope}, "
                                    f"SignedHeaders={';'.join(names)}, Signature={signature}")

    def request(self, method, path, query=None, body=b"", headers=None, unsigned_payload=False):
        """path is "/bucket" or "/bucket/key" (not yet URL-encoded); query a dict of strings.
        Connection errors propagate and drop the connection, so the next call reconnects."""
        query = query or {}
        headers = dict(headers or {})
        payload_hash = UNSIGNED_PAYLOAD if unsigned_payload else hashlib.sha256(body).hexdigest()
        self.sign(method, path, query, headers, payload_hash)
        target = _quote(path, safe="/-_.~")
        if query:
            target += "?" + "&".join(f"{_quote(k)}={_quote(v)}" for k, v in sorted(query.items()))
        if body or method in ("PUT", "POST"):
            headers["Content-Length"] = str(len(body))
        try:
            conn = self._connection()
            conn.request(method, target, body=body, headers=headers)
            response = conn.getresponse()
            data = response.read()
        except (OSError, http.client.HTTPException):
            self.close()
            raise
        result = Response(response.status, {k.lower(): v for k, v in response.getheaders()}, data)
        if response.will_close:
            self.close()
        return result
