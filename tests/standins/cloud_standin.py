#!/usr/bin/env python3
"""A local stand-in for UpCloud's API 1.3 (JSON, under /1.3/), for tests on machines that
cannot reach it. Python standard library only. (The aws provider is tested against moto:
tests/standins/moto_ec2.py.)

It keeps its servers in memory and CHECKS every request against the API's published shapes
(API 1.3, chapter "Servers", and UpCloud's own SDK request types), written down once below
as tables in upcloud_shapes.py (ROUTES, CREATE_SERVER, STORAGE_DEVICE, ...):

  - the routes: only the paths and methods of the operations the provider uses (list
    servers, server details, create, start, stop, delete); another method on a known path
    is 405 METHOD_NOT_ALLOWED, an unknown path 404;
  - Authorization: HTTP basic with the configured user and password, or a bearer token
    equal to the configured one (401 AUTHENTICATION_FAILED);
  - bodies: Content-Type application/json, valid JSON, the wrapper object the operation
    names (`server`, `stop_server`), every field known, of its type and allowed values,
    the required ones present (400 with UpCloud's error shape naming the field:
    FIELD_MISSING, FIELD_INVALID, FIELD_UNKNOWN);
  - state rules: stop only when started, start and delete only when stopped (409
    SERVER_STATE_ILLEGAL); unknown servers 404 SERVER_NOT_FOUND;

and answers in the published response shapes: `{"servers": {"server": [summary...]}}`,
`{"server": {details...}}` (numbers the API sends as strings, such as core_number and
memory_amount, as strings), 202 for create and stop, 204 with no body for delete, errors
as `{"error": {"error_code", "error_message"}}`.

Servers go maintenance -> started after --polls GET /server/{uuid}, and stop ->
maintenance -> stopped the same way. Every request is appended to the JSON-lines file given
with --log, with its status and the error code, so tests can assert on it.

Usage: cloud_standin.py --port 0 --log requests.jsonl [credentials options]
       prints "listening on 127.0.0.1:PORT" on stdout once it accepts connections.
A test-only control endpoint, POST /_standin/state {"id", "state"}, sets a server's state.
"""

import argparse
import base64
import binascii
import hmac
import json
import sys
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from upcloud_shapes import (INTERNAL_FIELDS, ROUTES, START_SERVER, STOP_SERVER, SUMMARY_FIELDS, ApiError,
                            check_fields, missing, invalid, new_server, now_utc, validate_create)


class Cloud:
    """The servers, behind one lock, and the request log."""

    def __init__(self, args):
        self.args = args
        self.lock = threading.Lock()
        self.servers = {}  # uuid -> server
        self.seq = 0
        self.created = 0  # numbers the addresses handed out
        self.log = open(args.log, "a", encoding="utf-8")

    def record(self, entry):
        with self.lock:
            self.seq += 1
            entry["seq"] = self.seq
            self.log.write(json.dumps(entry, sort_keys=True) + "\n")
            self.log.flush()

    def server(self, server_uuid):
        s = self.servers.get(server_uuid)
        if s is None:
            raise ApiError(404, "SERVER_NOT_FOUND", f"The server {server_uuid} does not exist.")
        return s

    @staticmethod
    def advance(server):
        """One poll of a server in transition."""
        if server["state"] == "maintenance" and server.get("target"):
            server["polls_left"] -= 1
            if server["polls_left"] <= 0:
                server["state"] = server.pop("target")

    @staticmethod
    def summary(s):
        return {k: s[k] for k in SUMMARY_FIELDS if k in s}

    @staticmethod
    def details(s):
        return {k: v for k, v in s.items() if k not in INTERNAL_FIELDS}


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "upcloud-standin/1.3"

    def log_message(self, *args):  # the JSON-lines log is the record
        pass

    @property
    def cloud(self) -> Cloud:
        return self.server.cloud

    def do_GET(self):
        self.dispatch()

    def do_POST(self):
        self.dispatch()

    def do_DELETE(self):
        self.dispatch()

    def do_PUT(self):
        self.dispatch()

    def do_PATCH(self):
        self.dispatch()

    def dispatch(self):
        length = int(self.headers.get("Content-Length") or 0)
        self.body = self.rfile.read(length) if length else b""
        url = urllib.parse.urlsplit(self.path)
        self.url_path, self.query = url.path, url.query
        self.entry = {
            "time": now_utc().isoformat(),
            "method": self.command,
            "path": self.url_path,
            "query": self.query,
            "headers": {k.lower(): v for k, v in self.headers.items()},
            "body": self.body.decode("utf-8", "replace"),
        }
        try:
            if self.url_path == "/_standin/state" and self.command == "POST":
                self.entry["api"] = "control"
                return self.control()
            self.entry["api"] = "upcloud"
            if not (self.url_path.startswith("/1.3/") or self.url_path == "/1.3"):
                raise ApiError(404, "NOT_FOUND", f"No such resource: {self.url_path} (the API is under /1.3)")
            self.authenticate()
            self.route(self.url_path[len("/1.3"):])
        except ApiError as e:
            self.error(e)

    def route(self, path):
        for pattern, methods in ROUTES:
            m = pattern.match(path)
            if not m:
                continue
            handler = methods.get(self.command)
            if handler is None:
                raise ApiError(405, "METHOD_NOT_ALLOWED", f"{self.command} is not allowed on {self.url_path} (allowed: {', '.join(methods)})")
            return getattr(self, handler)(**m.groupdict())
        raise ApiError(404, "NOT_FOUND", f"No such resource: {self.command} {self.url_path}")

    # ----- answers ------------------------------------------------------------------------

    def send(self, status, payload=None, content_type="application/json; charset=UTF-8"):
        data = b"" if payload is None else json.dumps(payload, indent=2).encode("utf-8")
        self.entry["status"] = status
        self.cloud.record(self.entry)
        self.send_response(status)
        if data:
            self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if data:
            self.wfile.write(data)

    def error(self, e):
        self.entry["error_code"] = e.code
        self.send(e.status, {"error": {"error_code": e.code, "error_message": e.message}})

    def control(self):
        req = self.json_body(required=True)
        with self.cloud.lock:
            s = self.cloud.servers.get(req.get("id"))
            if s is None:
                raise ApiError(404, "SERVER_NOT_FOUND", f"no server {req.get('id')}")
            s["state"] = req["state"]
            s.pop("target", None)
        self.send(200, {"ok": True})

    # ----- checks -------------------------------------------------------------------------

    def authenticate(self):
        a = self.cloud.args
        scheme, _, value = (self.headers.get("Authorization") or "").partition(" ")
        problem = "no usable Authorization header"
        if scheme.lower() == "basic" and a.upcloud_username:
            try:
                user, _, password = base64.b64decode(value, validate=True).decode().partition(":")
                problem = None if (user, password) == (a.upcloud_username, a.upcloud_password) else "wrong username or password"
            except (binascii.Error, UnicodeDecodeError):
                problem = "malformed basic credentials"
            self.entry["auth"] = "basic"
        elif scheme.lower() == "bearer" and a.upcloud_token:
            problem = None if hmac.compare_digest(value.strip(), a.upcloud_token) else "wrong token"
            self.entry["auth"] = "bearer"
        if problem:
            self.entry["auth"] = "refused: " + problem
            raise ApiError(401, "AUTHENTICATION_FAILED", "Authentication failed using the given username and password.")

    def json_body(self, required):
        """The JSON body; None when there is none and it is optional."""
        if not self.body and not required:
            return None
        ctype = (self.headers.get("Content-Type") or "").split(";")[0].strip()
        if ctype != "application/json":
            raise ApiError(415, "CONTENT_TYPE_INVALID", f"The Content-Type header has an invalid value: {ctype!r}; use application/json.")
        try:
            return json.loads(self.body)
        except ValueError:
            raise ApiError(400, "REQUEST_BODY_INVALID", "The request body is not valid JSON.")

    # ----- operations ---------------------------------------------------------------------

    def list_servers(self):
        with self.cloud.lock:
            servers = [self.cloud.summary(s) for s in self.cloud.servers.values()]
        self.send(200, {"servers": {"server": servers}})

    def server_details(self, uuid):
        with self.cloud.lock:
            s = self.cloud.server(uuid)
            self.cloud.advance(s)
            details = self.cloud.details(s)
        self.send(200, {"server": details})

    def create_server(self):
        server = validate_create(self.json_body(required=True))
        with self.cloud.lock:
            self.cloud.created += 1
            n = self.cloud.created
        s = new_server(server, n, self.cloud.args.polls)
        with self.cloud.lock:
            self.cloud.servers[s["uuid"]] = s
            details = self.cloud.details(s)
        self.send(202, {"server": details})

    def stop_server(self, uuid):
        body = self.json_body(required=False) or {"stop_server": {}}
        if not isinstance(body, dict) or set(body) != {"stop_server"}:
            raise missing("stop_server")
        check_fields(body["stop_server"], STOP_SERVER, "stop_server")
        with self.cloud.lock:
            s = self.cloud.server(uuid)
            if s["state"] != "started":
                raise ApiError(409, "SERVER_STATE_ILLEGAL", f"The server {uuid} is not in started state.")
            s.update(state="maintenance", target="stopped", polls_left=self.cloud.args.polls)
            details = self.cloud.details(s)
        self.send(202, {"server": details})

    def start_server(self, uuid):
        body = self.json_body(required=False)
        if body is not None:
            if not isinstance(body, dict) or set(body) != {"server"}:
                raise missing("server")
            check_fields(body["server"], START_SERVER, "server")
        with self.cloud.lock:
            s = self.cloud.server(uuid)
            if s["state"] != "stopped":
                raise ApiError(409, "SERVER_STATE_ILLEGAL", f"The server {uuid} is not in stopped state.")
            s.update(state="maintenance", target="started", polls_left=self.cloud.args.polls)
            details = self.cloud.details(s)
        self.send(200, {"server": details})

    def delete_server(self, uuid):
        params = urllib.parse.parse_qs(self.query)
        for name, values in params.items():
            if name not in ("storages", "backups"):
                raise ApiError(400, f"{name.upper()}_UNKNOWN", f"The query parameter {name} is not known.")
        if params.get("storages", ["0"])[-1] not in ("0", "1", "true", "false"):
            raise invalid("storages", "must be 0, 1, true or false")
        if params.get("backups", ["keep"])[-1] not in ("keep", "keep_latest", "delete"):
            raise invalid("backups", "must be keep, keep_latest or delete")
        with self.cloud.lock:
            s = self.cloud.server(uuid)
            if s["state"] != "stopped":
                raise ApiError(409, "SERVER_STATE_ILLEGAL", f"The server {uuid} is not in stopped state.")
            del self.cloud.servers[uuid]
            self.entry["storages_deleted"] = params.get("storages", ["0"])[-1] in ("1", "true")
        self.send(204)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--port", type=int, required=True, help="loopback port; 0 picks a free one (printed)")
    ap.add_argument("--log", required=True, help="JSON-lines file receiving every request")
    ap.add_argument("--polls", type=int, default=2, help="status polls before a transition completes")
    ap.add_argument("--upcloud-username", default="standin-api")
    ap.add_argument("--upcloud-password", default="standin-secret")
    ap.add_argument("--upcloud-token", default="ucat_standin_token")
    args = ap.parse_args()
    httpd = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    httpd.daemon_threads = True
    httpd.cloud = Cloud(args)
    print(f"listening on 127.0.0.1:{httpd.server_address[1]}", flush=True)
    try:
        httpd.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    sys.exit(main())
