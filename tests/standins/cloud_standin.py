#!/usr/bin/env python3
"""A local stand-in for the two cloud APIs the providers use, for tests on machines that
cannot reach the clouds: UpCloud's API 1.3 (JSON, under /1.3/) and the AWS EC2 Query API
(version 2016-11-15, POST or GET on /). Python standard library only.

It keeps its servers and instances in memory and CHECKS what it receives:

UpCloud
  - Authorization must be HTTP basic with the configured user and password, or a bearer
    token equal to the configured token (401 AUTHENTICATION_FAILED otherwise);
  - POST /server: the JSON body shape of "Create server" (zone, title, hostname, plan,
    storage_devices.storage_device[] with action/storage/title/size/tier, login_user,
    networking, labels, metadata...): 400 with an UpCloud-style error naming the field;
  - servers go maintenance -> started (after --polls GET /server/{uuid}), stop ->
    maintenance -> stopped, DELETE only when stopped (409 SERVER_STATE_ILLEGAL).

AWS EC2
  - Signature Version 4 is recomputed from the received request (method, path, query,
    the signed headers as received, the body's SHA-256) and the known secret key; a wrong
    signature is refused with 403 SignatureDoesNotMatch, an unknown access key with 401
    AuthFailure, a missing/wrong session token, a scope not for ec2/the configured region,
    a clock skew over 5 minutes: refused too, with AWS-style XML errors;
  - RunInstances, DescribeInstances (filters tag:*, tag-key, instance-state-name,
    instance-id; InstanceId.N), TerminateInstances, StartInstances with realistic XML;
    instances go pending -> running after --polls describes (the public address appears
    when running), shutting-down -> terminated; terminated instances stay listed; a new
    instance is invisible to the first describe (InvalidInstanceID.NotFound), as AWS's
    eventual consistency can do.

What it does NOT check: anything the real clouds decide beyond this (quotas, plan/zone
or AMI/subnet availability, billing, real networking), TLS, and UpCloud's full field
list (unknown fields are accepted).

Every request is appended to the JSON-lines file given with --log, with its status and
what was decided (signature valid or not, the error code), so tests can assert on it.

Usage: cloud_standin.py --port 0 --log requests.jsonl [credentials options]
       prints "listening on 127.0.0.1:PORT" on stdout once it accepts connections.
A test-only control endpoint, POST /_standin/state {"api", "id", "state"}, sets a server's
or instance's state (to test how the providers handle stopped servers).
"""

import argparse
import base64
import binascii
import datetime
import hashlib
import hmac
import json
import random
import re
import sys
import threading
import urllib.parse
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from xml.sax.saxutils import escape

EC2_VERSION = "2016-11-15"
EC2_XMLNS = f"http://ec2.amazonaws.com/doc/{EC2_VERSION}/"

UPCLOUD_ZONES = {
    "fi-hel1", "fi-hel2", "de-fra1", "nl-ams1", "uk-lon1", "us-chi1", "us-nyc1",
    "us-sjo1", "sg-sin1", "au-syd1", "es-mad1", "pl-waw1", "se-sto1", "dk-cph1",
}
# Public templates (the OS disk of a new server is a clone of one of them).
UPCLOUD_TEMPLATES = {
    "01000000-0000-4000-8000-000030240200": "Ubuntu Server 24.04 LTS (Noble Numbat)",
    "01000000-0000-4000-8000-000030220200": "Ubuntu Server 22.04 LTS (Jammy Jellyfish)",
    "01000000-0000-4000-8000-000020070100": "Debian GNU/Linux 12 (Bookworm)",
}
UPCLOUD_PLAN = re.compile(r"^(DEV-|HICPU-|HIMEM-)?\d+xCPU-\d+GB(-\d+GB)?$")
HOSTNAME = re.compile(r"^(?=.{1,128}$)[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$")
UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
AMI = re.compile(r"^ami-([0-9a-f]{8}|[0-9a-f]{17})$")
INSTANCE_TYPE = re.compile(r"^[a-z][a-z0-9-]*\.[a-z0-9]+$")

EC2_STATE_CODES = {"pending": 0, "running": 16, "shutting-down": 32, "terminated": 48, "stopping": 64, "stopped": 80}


class ApiError(Exception):
    def __init__(self, status, code, message):
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


def now_utc():
    return datetime.datetime.now(datetime.timezone.utc)


class Cloud:
    """Both clouds' state, behind one lock."""

    def __init__(self, args):
        self.args = args
        self.lock = threading.Lock()
        self.servers = {}  # UpCloud uuid -> server
        self.deleted_storages = []
        self.instances = {}  # EC2 instance id -> instance
        self.seq = 0
        self.created = 0  # numbers the addresses handed out
        self.log = open(args.log, "a", encoding="utf-8")

    def record(self, entry):
        with self.lock:
            self.seq += 1
            entry["seq"] = self.seq
            self.log.write(json.dumps(entry, sort_keys=True) + "\n")
            self.log.flush()

    # ----- UpCloud --------------------------------------------------------------------

    def upcloud_advance(self, server):
        """One poll of a server in transition."""
        if server["state"] == "maintenance" and server.get("target"):
            server["polls_left"] -= 1
            if server["polls_left"] <= 0:
                server["state"] = server.pop("target")

    def upcloud_summary(self, s):
        keys = ("uuid", "hostname", "title", "zone", "plan", "state", "core_number", "memory_amount",
                "labels", "tags", "license", "created", "host", "simple_backup")
        return {k: s[k] for k in keys if k in s}

    def upcloud_details(self, s):
        d = {k: v for k, v in s.items() if k not in ("target", "polls_left", "login_user")}
        return d


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "cloud-standin/1.0"

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
        if self.url_path.startswith("/1.3/") or self.url_path == "/1.3":
            self.entry["api"] = "upcloud"
            self.upcloud()
        elif self.url_path.startswith("/_standin/"):
            self.entry["api"] = "control"
            self.control()
        else:
            self.entry["api"] = "aws"
            self.aws()

    def send(self, status, body, content_type):
        data = body.encode("utf-8") if isinstance(body, str) else body
        self.entry["status"] = status
        self.cloud.record(self.entry)
        self.send_response(status)
        if data:
            self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if data:
            self.wfile.write(data)

    # ----- control (tests only) ---------------------------------------------------------

    def control(self):
        try:
            req = json.loads(self.body or b"{}")
            with self.cloud.lock:
                table = self.cloud.servers if req.get("api") == "upcloud" else self.cloud.instances
                item = table[req["id"]]
                item["state"] = req["state"]
                item.pop("target", None)
            self.send(200, json.dumps({"ok": True}), "application/json")
        except (KeyError, ValueError) as e:
            self.send(400, json.dumps({"error": str(e)}), "application/json")

    # ----- UpCloud --------------------------------------------------------------------

    def upcloud_error(self, status, code, message):
        self.entry["error_code"] = code
        body = json.dumps({"error": {"error_code": code, "error_message": message}})
        self.send(status, body, "application/json; charset=UTF-8")

    def upcloud_auth(self):
        a = self.cloud.args
        header = self.headers.get("Authorization") or ""
        scheme, _, value = header.partition(" ")
        if scheme.lower() == "basic" and a.upcloud_username:
            try:
                user, _, password = base64.b64decode(value, validate=True).decode().partition(":")
            except (binascii.Error, UnicodeDecodeError):
                return "malformed basic credentials"
            if (user, password) == (a.upcloud_username, a.upcloud_password):
                self.entry["auth"] = "basic"
                return None
            return "wrong username or password"
        if scheme.lower() == "bearer" and a.upcloud_token:
            if hmac.compare_digest(value.strip(), a.upcloud_token):
                self.entry["auth"] = "bearer"
                return None
            return "wrong token"
        return "no usable Authorization header"

    def upcloud(self):
        problem = self.upcloud_auth()
        if problem:
            self.entry["auth"] = "refused: " + problem
            return self.upcloud_error(401, "AUTHENTICATION_FAILED", "Authentication failed using the given username and password.")
        parts = [p for p in self.url_path.split("/") if p][1:]  # after "1.3"
        try:
            if parts == ["server"] and self.command == "GET":
                return self.upcloud_list()
            if parts == ["server"] and self.command == "POST":
                return self.upcloud_create()
            if len(parts) == 2 and parts[0] == "server" and self.command == "GET":
                return self.upcloud_get(parts[1])
            if len(parts) == 2 and parts[0] == "server" and self.command == "DELETE":
                return self.upcloud_delete(parts[1])
            if len(parts) == 3 and parts[0] == "server" and self.command == "POST" and parts[2] in ("stop", "start"):
                return self.upcloud_stop(parts[1]) if parts[2] == "stop" else self.upcloud_start(parts[1])
            raise ApiError(404, "NOT_FOUND", f"No such resource: {self.command} {self.url_path}")
        except ApiError as e:
            return self.upcloud_error(e.status, e.code, e.message)

    def json_body(self, required):
        ctype = self.headers.get("Content-Type") or ""
        if not ctype.split(";")[0].strip() == "application/json":
            if required:
                raise ApiError(415, "CONTENT_TYPE_INVALID", f"The Content-Type header has an invalid value: {ctype!r}; use application/json.")
            return None
        try:
            return json.loads(self.body)
        except ValueError:
            raise ApiError(400, "REQUEST_BODY_INVALID", "The request body is not valid JSON.")

    def upcloud_json(self, status, payload):
        self.send(status, json.dumps(payload, indent=2), "application/json; charset=UTF-8")

    def find_server(self, server_uuid):
        s = self.cloud.servers.get(server_uuid)
        if s is None:
            raise ApiError(404, "SERVER_NOT_FOUND", f"The server {server_uuid} does not exist.")
        return s

    def upcloud_list(self):
        with self.cloud.lock:
            servers = [self.cloud.upcloud_summary(s) for s in self.cloud.servers.values()]
        self.upcloud_json(200, {"servers": {"server": servers}})

    def upcloud_get(self, server_uuid):
        with self.cloud.lock:
            s = self.find_server(server_uuid)
            self.cloud.upcloud_advance(s)
            details = self.cloud.upcloud_details(s)
        self.upcloud_json(200, {"server": details})

    def upcloud_create(self):
        body = self.json_body(required=True)
        server = validate_upcloud_server(body)
        plan = server.get("plan", "custom")
        m = re.match(r"^(?:[A-Z]+-)?(\d+)xCPU-(\d+)GB", plan)
        cores, memory = (m.group(1), str(int(m.group(2)) * 1024)) if m else (str(server.get("core_number")), str(server.get("memory_amount")))
        with self.cloud.lock:
            self.cloud.created += 1
            n = self.cloud.created
        addresses = []
        interfaces = (server.get("networking") or {}).get("interfaces", {}).get("interface")
        if interfaces is None:  # the API's default: public IPv4, utility IPv4, public IPv6
            interfaces = [{"type": "public", "ip_addresses": {"ip_address": [{"family": "IPv4"}]}},
                          {"type": "utility", "ip_addresses": {"ip_address": [{"family": "IPv4"}]}}]
        for index, interface in enumerate(interfaces, start=1):
            for ip in interface["ip_addresses"]["ip_address"]:
                family = ip.get("family", "IPv4")
                if family == "IPv6":
                    address = f"2a04:3540:1000:310::{n:x}:{index}"
                elif interface["type"] == "public":
                    address = f"94.237.{10 + n % 200}.{10 + index}"
                else:
                    address = f"10.{n % 250}.{index}.{10 + n % 200}"
                addresses.append({"access": interface["type"], "address": address, "family": family})
        storages = []
        for i, dev in enumerate(server["storage_devices"]["storage_device"]):
            storages.append({
                "address": f"virtio:{i}",
                "part_of_plan": "yes" if i == 0 else "no",
                "storage": "01" + str(uuid.uuid4())[2:],
                "storage_size": int(dev.get("size", 10)),
                "storage_tier": dev.get("tier", "maxiops"),
                "storage_title": dev.get("title", ""),
                "type": "disk",
                "boot_disk": "1" if i == 0 else "0",
            })
        s = {
            "uuid": "00" + str(uuid.uuid4())[2:],
            "hostname": server["hostname"],
            "title": server["title"],
            "zone": server["zone"],
            "plan": plan,
            "core_number": cores,
            "memory_amount": memory,
            "state": "maintenance",
            "target": "started",
            "polls_left": self.cloud.args.polls,
            "created": int(now_utc().timestamp()),
            "host": random.randint(10**9, 10**10),
            "license": 0,
            "metadata": server.get("metadata", "no"),
            "labels": server.get("labels", {"label": []}),
            "tags": {"tag": []},
            "simple_backup": "no",
            "ip_addresses": {"ip_address": addresses},
            "storage_devices": {"storage_device": storages},
            "login_user": server.get("login_user"),
        }
        with self.cloud.lock:
            self.cloud.servers[s["uuid"]] = s
            details = self.cloud.upcloud_details(s)
        self.upcloud_json(202, {"server": details})

    def upcloud_stop(self, server_uuid):
        body = self.json_body(required=False) or {}
        stop = body.get("stop_server", {}) if isinstance(body, dict) else None
        if not isinstance(stop, dict):
            raise ApiError(400, "STOP_SERVER_INVALID", "The parameter stop_server is invalid.")
        if stop.get("stop_type", "soft") not in ("soft", "hard"):
            raise ApiError(400, "STOP_TYPE_INVALID", "The parameter stop_type must be soft or hard.")
        with self.cloud.lock:
            s = self.find_server(server_uuid)
            if s["state"] != "started":
                raise ApiError(409, "SERVER_STATE_ILLEGAL", f"The server {server_uuid} is not in started state.")
            s.update(state="maintenance", target="stopped", polls_left=self.cloud.args.polls)
            details = self.cloud.upcloud_details(s)
        self.upcloud_json(202, {"server": details})

    def upcloud_start(self, server_uuid):
        with self.cloud.lock:
            s = self.find_server(server_uuid)
            if s["state"] != "stopped":
                raise ApiError(409, "SERVER_STATE_ILLEGAL", f"The server {server_uuid} is not in stopped state.")
            s.update(state="maintenance", target="started", polls_left=self.cloud.args.polls)
            details = self.cloud.upcloud_details(s)
        self.upcloud_json(200, {"server": details})

    def upcloud_delete(self, server_uuid):
        params = urllib.parse.parse_qs(self.query)
        with self.cloud.lock:
            s = self.find_server(server_uuid)
            if s["state"] != "stopped":
                raise ApiError(409, "SERVER_STATE_ILLEGAL", f"The server {server_uuid} is not in stopped state.")
            del self.cloud.servers[server_uuid]
            if params.get("storages", ["0"])[0] in ("1", "true"):
                self.cloud.deleted_storages += [d["storage"] for d in s["storage_devices"]["storage_device"]]
                self.entry["storages_deleted"] = True
        self.send(204, b"", "")

    # ----- AWS EC2 --------------------------------------------------------------------

    def ec2_error(self, status, code, message):
        self.entry["error_code"] = code
        xml = ('<?xml version="1.0" encoding="UTF-8"?>\n'
               f"<Response><Errors><Error><Code>{escape(code)}</Code><Message>{escape(message)}</Message></Error></Errors>"
               f"<RequestID>{uuid.uuid4()}</RequestID></Response>")
        self.send(status, xml, "text/xml;charset=UTF-8")

    def aws(self):
        try:
            if self.command == "POST":
                ctype = (self.headers.get("Content-Type") or "").split(";")[0].strip().lower()
                if ctype != "application/x-www-form-urlencoded":
                    raise ApiError(400, "InvalidParameterValue", f"Unsupported Content-Type {ctype!r} for a Query API POST")
                params = urllib.parse.parse_qs(self.body.decode("utf-8"), keep_blank_values=True, strict_parsing=bool(self.body))
            elif self.command == "GET":
                params = urllib.parse.parse_qs(self.query, keep_blank_values=True)
            else:
                raise ApiError(400, "InvalidAction", f"The HTTP method {self.command} is not supported")
            params = {k: v[-1] for k, v in params.items()}
            self.entry["action"] = params.get("Action")
            self.entry["params"] = params
            self.check_sigv4()
            if "Action" not in params:
                raise ApiError(400, "MissingAction", "The request must contain the parameter Action")
            if params.get("Version") != EC2_VERSION:
                raise ApiError(400, "InvalidParameterValue", f"This stand-in implements Version {EC2_VERSION}, not {params.get('Version')!r}")
            handler = {
                "RunInstances": self.ec2_run,
                "DescribeInstances": self.ec2_describe,
                "TerminateInstances": self.ec2_terminate,
                "StartInstances": self.ec2_start,
            }.get(params["Action"])
            if handler is None:
                raise ApiError(400, "InvalidAction", f"The action {params['Action']} is not valid for this web service.")
            xml = handler(params)
            self.send(200, xml, "text/xml;charset=UTF-8")
        except ApiError as e:
            self.ec2_error(e.status, e.code, e.message)
        except ValueError as e:
            self.ec2_error(400, "InvalidParameterValue", f"Malformed request: {e}")

    def check_sigv4(self):
        a = self.cloud.args
        header = self.headers.get("Authorization")
        if not header:
            self.entry["signature"] = "missing"
            raise ApiError(401, "MissingAuthenticationToken", "Request is missing Authentication Token")
        m = re.match(r"^AWS4-HMAC-SHA256 Credential=([^,\s]+),\s*SignedHeaders=([^,\s]+),\s*Signature=([0-9a-f]{64})$", header.strip())
        if not m:
            self.entry["signature"] = "malformed"
            raise ApiError(400, "IncompleteSignature", f"Authorization header requires Credential, SignedHeaders and Signature: {header!r}")
        credential, signed_headers, signature = m.groups()
        parts = credential.split("/")
        if len(parts) != 5:
            self.entry["signature"] = "malformed"
            raise ApiError(400, "IncompleteSignature", f"Malformed credential {credential!r}")
        access_key, date, region, service, terminator = parts
        self.entry["credential"] = {"access_key": access_key, "date": date, "region": region, "service": service}
        if access_key != a.aws_access_key_id:
            self.entry["signature"] = "unknown access key"
            raise ApiError(401, "AuthFailure", "AWS was not able to validate the provided access credentials")
        if service != "ec2" or terminator != "aws4_request":
            self.entry["signature"] = "wrong scope"
            raise ApiError(403, "SignatureDoesNotMatch", f"Credential should be scoped to correct service: 'ec2', not {service!r}")
        if a.aws_region and region != a.aws_region:
            self.entry["signature"] = "wrong region"
            raise ApiError(403, "SignatureDoesNotMatch", f"Credential should be scoped to a valid region, not '{region}'. ")
        names = signed_headers.split(";")
        if "host" not in names or "x-amz-date" not in names or names != sorted(names):
            self.entry["signature"] = "bad signed headers"
            raise ApiError(403, "SignatureDoesNotMatch", f"SignedHeaders must be sorted and include host and x-amz-date: {signed_headers}")
        amz_date = self.headers.get("X-Amz-Date") or ""
        try:
            when = datetime.datetime.strptime(amz_date, "%Y%m%dT%H%M%SZ").replace(tzinfo=datetime.timezone.utc)
        except ValueError:
            self.entry["signature"] = "bad date"
            raise ApiError(400, "IncompleteSignature", f"X-Amz-Date {amz_date!r} is not YYYYMMDDTHHMMSSZ")
        if abs((now_utc() - when).total_seconds()) > 300:
            self.entry["signature"] = "expired"
            raise ApiError(400, "RequestExpired", f"Request has expired. Timestamp date is {amz_date}")
        if date != amz_date[:8]:
            self.entry["signature"] = "scope date mismatch"
            raise ApiError(403, "SignatureDoesNotMatch", f"Date in Credential scope does not match YYYYMMDD from ISO-8601 version of date from HTTP: '{date}' != '{amz_date[:8]}'")
        token = self.headers.get("X-Amz-Security-Token")
        if a.aws_session_token and (token != a.aws_session_token or "x-amz-security-token" not in names):
            self.entry["signature"] = "bad session token"
            raise ApiError(401, "AuthFailure", "AWS was not able to validate the provided access credentials (session token missing, wrong or not signed)")
        header_values = {}
        for name in names:
            values = self.headers.get_all(name)
            if values is None:
                self.entry["signature"] = f"signed header {name} absent"
                raise ApiError(403, "SignatureDoesNotMatch", f"Signed header {name} is not in the request")
            header_values[name] = values
        expected, canonical_request = sigv4_signature(
            self.command, self.url_path, self.query, header_values, self.body,
            a.aws_secret_access_key, amz_date, region, service)
        if not hmac.compare_digest(expected, signature):
            self.entry["signature"] = "mismatch"
            self.entry["canonical_request"] = canonical_request
            raise ApiError(403, "SignatureDoesNotMatch",
                           "The request signature we calculated does not match the signature you provided. "
                           "Check your AWS Secret Access Key and signing method. Consult the service documentation for details.")
        self.entry["signature"] = "valid"

    def instance_ids(self, params, required):
        ids = [params[k] for k in sorted(params, key=numbered_key) if re.fullmatch(r"InstanceId\.\d+", k)]
        if required and not ids:
            raise ApiError(400, "MissingParameter", "The request must contain the parameter InstanceId")
        return ids

    def require_instances(self, ids):
        missing = [i for i in ids if i not in self.cloud.instances or self.cloud.instances[i]["invisible"] > 0]
        for i in ids:
            if i in self.cloud.instances and self.cloud.instances[i]["invisible"] > 0:
                self.cloud.instances[i]["invisible"] -= 1
        if missing:
            raise ApiError(400, "InvalidInstanceID.NotFound", f"The instance ID{'s' if len(missing) > 1 else ''} '{', '.join(missing)}' do{'' if len(missing) > 1 else 'es'} not exist")

    def ec2_run(self, p):
        for name in ("ImageId", "MinCount", "MaxCount"):
            if not p.get(name):
                raise ApiError(400, "MissingParameter", f"The request must contain the parameter {name}")
        if not AMI.match(p["ImageId"]):
            raise ApiError(400, "InvalidAMIID.Malformed", f"Invalid id: \"{p['ImageId']}\" (expecting \"ami-...\")")
        try:
            min_count, max_count = int(p["MinCount"]), int(p["MaxCount"])
        except ValueError:
            raise ApiError(400, "InvalidParameterValue", "MinCount and MaxCount must be integers")
        if not 1 <= min_count <= max_count:
            raise ApiError(400, "InvalidParameterValue", "MinCount must be at least 1 and at most MaxCount")
        instance_type = p.get("InstanceType", "m1.small")
        if not INSTANCE_TYPE.match(instance_type):
            raise ApiError(400, "InvalidParameterValue", f"Invalid value '{instance_type}' for InstanceType.")
        tags = []
        for k in sorted(p, key=numbered_key):
            m = re.fullmatch(r"TagSpecification\.(\d+)\.ResourceType", k)
            if m:
                if p[k] not in ("instance", "volume", "network-interface"):
                    raise ApiError(400, "InvalidParameterValue", f"'{p[k]}' is not a valid taggable resource type")
                if p[k] == "instance":
                    n = m.group(1)
                    for tk in sorted(p, key=numbered_key):
                        tm = re.fullmatch(rf"TagSpecification\.{n}\.Tag\.(\d+)\.Key", tk)
                        if tm:
                            tags.append({"key": p[tk], "value": p.get(f"TagSpecification.{n}.Tag.{tm.group(1)}.Value", "")})
        if "UserData" in p:
            try:
                base64.b64decode(p["UserData"], validate=True)
            except binascii.Error:
                raise ApiError(400, "InvalidParameterValue", "Invalid BASE64 encoding of user data.")
        for k in p:
            m = re.fullmatch(r"BlockDeviceMapping\.(\d+)\.Ebs\.VolumeSize", k)
            if m and not (p[k].isdigit() and 1 <= int(p[k]) <= 16384):
                raise ApiError(400, "InvalidParameterValue", f"Volume size {p[k]} is invalid")
            m = re.fullmatch(r"BlockDeviceMapping\.(\d+)\.Ebs\.VolumeType", k)
            if m and p[k] not in ("gp2", "gp3", "io1", "io2", "st1", "sc1", "standard"):
                raise ApiError(400, "InvalidParameterValue", f"Volume type {p[k]} is invalid")
        groups = [p[k] for k in sorted(p, key=numbered_key) if re.fullmatch(r"SecurityGroupId\.\d+", k)]
        region = self.entry.get("credential", {}).get("region", "us-east-1")
        reservation = "r-" + random_hex(17)
        created = []
        with self.cloud.lock:
            for _ in range(max_count):
                self.cloud.created += 1
                n = self.cloud.created
                i = {
                    "instanceId": "i-" + random_hex(17),
                    "imageId": p["ImageId"],
                    "state": "pending",
                    "target": "running",
                    "polls_left": self.cloud.args.polls,
                    "invisible": self.cloud.args.aws_invisible_polls,
                    "instanceType": instance_type,
                    "keyName": p.get("KeyName"),
                    "subnetId": p.get("SubnetId", "subnet-0a1b2c3d"),
                    "vpcId": "vpc-0a1b2c3d",
                    "groups": groups,
                    "privateIpAddress": f"172.31.{n % 250}.{10 + n % 240}",
                    "publicIp": f"54.{200 + n % 50}.{n % 250}.{10 + n % 240}",
                    "availabilityZone": region + "a",
                    "launchTime": now_utc().strftime("%Y-%m-%dT%H:%M:%S.000Z"),
                    "reservationId": reservation,
                    "tags": tags,
                }
                self.cloud.instances[i["instanceId"]] = i
                created.append(instance_xml(i))
        return ec2_response("RunInstances",
                            f"<reservationId>{reservation}</reservationId><ownerId>123456789012</ownerId><groupSet/>"
                            f"<instancesSet>{''.join(created)}</instancesSet>")

    def ec2_describe(self, p):
        ids = self.instance_ids(p, required=False)
        filters = []
        for k in sorted(p, key=numbered_key):
            m = re.fullmatch(r"Filter\.(\d+)\.Name", k)
            if m:
                n = m.group(1)
                values = [p[vk] for vk in sorted(p, key=numbered_key) if re.fullmatch(rf"Filter\.{n}\.Value\.\d+", vk)]
                name = p[k]
                if not (name.startswith("tag:") or name in ("tag-key", "instance-state-name", "instance-id")):
                    raise ApiError(400, "InvalidParameterValue", f"The filter '{name}' is invalid")
                filters.append((name, values))
        with self.cloud.lock:
            if ids:
                self.require_instances(ids)
                selected = [self.cloud.instances[i] for i in ids]
            else:
                selected = []
                for i in self.cloud.instances.values():
                    if i["invisible"] > 0:
                        i["invisible"] -= 1
                        continue
                    selected.append(i)
            selected = [i for i in selected if all(matches(i, name, values) for name, values in filters)]
            for i in selected:
                advance_instance(i)
            reservations = {}
            for i in selected:
                reservations.setdefault(i["reservationId"], []).append(instance_xml(i))
        body = "".join(
            f"<item><reservationId>{r}</reservationId><ownerId>123456789012</ownerId><groupSet/>"
            f"<instancesSet>{''.join(items)}</instancesSet></item>"
            for r, items in reservations.items())
        return ec2_response("DescribeInstances", f"<reservationSet>{body}</reservationSet>")

    def ec2_terminate(self, p):
        ids = self.instance_ids(p, required=True)
        changes = []
        with self.cloud.lock:
            self.require_instances(ids)
            for iid in ids:
                i = self.cloud.instances[iid]
                previous = i["state"]
                if previous not in ("shutting-down", "terminated"):
                    i.update(state="shutting-down", target="terminated", polls_left=self.cloud.args.polls)
                changes.append(state_change(i, previous))
        return ec2_response("TerminateInstances", f"<instancesSet>{''.join(changes)}</instancesSet>")

    def ec2_start(self, p):
        ids = self.instance_ids(p, required=True)
        changes = []
        with self.cloud.lock:
            self.require_instances(ids)
            for iid in ids:
                i = self.cloud.instances[iid]
                previous = i["state"]
                if previous in ("shutting-down", "terminated", "stopping"):
                    raise ApiError(400, "IncorrectInstanceState", f"The instance '{iid}' is not in a state from which it can be started.")
                if previous == "stopped":
                    i.update(state="pending", target="running", polls_left=self.cloud.args.polls)
                changes.append(state_change(i, previous))
        return ec2_response("StartInstances", f"<instancesSet>{''.join(changes)}</instancesSet>")


# ----- UpCloud body validation ---------------------------------------------------------

def missing(field):
    return ApiError(400, f"{field.upper()}_MISSING", f"The parameter {field} is missing.")


def invalid(field, why):
    return ApiError(400, f"{field.upper()}_INVALID", f"The parameter {field} is invalid: {why}")


def validate_upcloud_server(body):
    if not isinstance(body, dict) or "server" not in body:
        raise missing("server")
    s = body["server"]
    if not isinstance(s, dict):
        raise invalid("server", "must be an object")
    for field in ("zone", "title", "hostname"):
        if field not in s:
            raise missing(field)
        if not isinstance(s[field], str) or not s[field]:
            raise invalid(field, "must be a non-empty string")
    if s["zone"] not in UPCLOUD_ZONES:
        raise ApiError(400, "ZONE_INVALID", f"The zone {s['zone']} is not valid.")
    if not HOSTNAME.match(s["hostname"]):
        raise invalid("hostname", f"{s['hostname']!r} is not a valid hostname")
    if "plan" in s:
        if not isinstance(s["plan"], str) or not UPCLOUD_PLAN.match(s["plan"]):
            raise ApiError(400, "PLAN_INVALID", f"The plan {s.get('plan')!r} is not valid.")
    elif "core_number" not in s or "memory_amount" not in s:
        raise missing("plan")
    for field, allowed in (("metadata", ("yes", "no")), ("password_delivery", ("none", "email", "sms")),
                           ("firewall", ("on", "off"))):
        if field in s and s[field] not in allowed:
            raise invalid(field, f"must be one of {', '.join(allowed)}")
    devices = s.get("storage_devices")
    if devices is None:
        raise missing("storage_devices")
    if not isinstance(devices, dict) or "storage_device" not in devices:
        raise missing("storage_device")
    devices = devices["storage_device"]
    if not isinstance(devices, list) or not devices:
        raise invalid("storage_device", "must be a non-empty list")
    for dev in devices:
        if not isinstance(dev, dict):
            raise invalid("storage_device", "items must be objects")
        if "action" not in dev:
            raise missing("action")
        if dev["action"] not in ("clone", "create", "attach"):
            raise invalid("action", "must be clone, create or attach")
        if dev["action"] in ("clone", "attach"):
            if "storage" not in dev:
                raise missing("storage")
            if not isinstance(dev["storage"], str) or not UUID.match(dev["storage"]):
                raise invalid("storage", "must be a storage UUID")
            if dev["action"] == "clone" and dev["storage"] not in UPCLOUD_TEMPLATES:
                raise ApiError(404, "STORAGE_NOT_FOUND", f"The storage {dev['storage']} does not exist.")
        if dev["action"] in ("clone", "create"):
            if "title" not in dev:
                raise missing("title")
            if "size" not in dev:
                raise missing("size")
            if not isinstance(dev["size"], int) or isinstance(dev["size"], bool) or not 1 <= dev["size"] <= 4096:
                raise invalid("size", "must be an integer from 1 to 4096 (GB)")
        if "tier" in dev and dev["tier"] not in ("maxiops", "standard", "hdd"):
            raise invalid("tier", "must be maxiops, standard or hdd")
    if "login_user" in s:
        lu = s["login_user"]
        if not isinstance(lu, dict):
            raise invalid("login_user", "must be an object")
        if "create_password" in lu and lu["create_password"] not in ("yes", "no"):
            raise invalid("create_password", "must be yes or no")
        if "username" in lu and (not isinstance(lu["username"], str) or not re.fullmatch(r"[a-z_][a-z0-9_-]{0,31}", lu["username"])):
            raise invalid("username", "is not a valid user name")
        if "ssh_keys" in lu:
            keys = lu["ssh_keys"].get("ssh_key") if isinstance(lu["ssh_keys"], dict) else None
            if not isinstance(keys, list) or not all(isinstance(k, str) and re.match(r"^(ssh-(rsa|ed25519|dss)|ecdsa-sha2-\S+|sk-\S+) \S+", k) for k in keys):
                raise invalid("ssh_key", "must be a list of SSH public keys")
    if "networking" in s:
        interfaces = s["networking"].get("interfaces", {}).get("interface") if isinstance(s["networking"], dict) else None
        if not isinstance(interfaces, list) or not interfaces:
            raise invalid("networking", "interfaces.interface must be a non-empty list")
        for interface in interfaces:
            if not isinstance(interface, dict) or interface.get("type") not in ("public", "utility", "private"):
                raise invalid("type", "interface type must be public, utility or private")
            ips = interface.get("ip_addresses", {}).get("ip_address") if isinstance(interface.get("ip_addresses"), dict) else None
            if not isinstance(ips, list) or not ips or any(ip.get("family") not in ("IPv4", "IPv6") for ip in ips):
                raise invalid("ip_addresses", "each interface needs ip_address entries of family IPv4 or IPv6")
    if "labels" in s:
        labels = s["labels"].get("label") if isinstance(s["labels"], dict) else None
        if not isinstance(labels, list) or not all(isinstance(l, dict) and isinstance(l.get("key"), str) and isinstance(l.get("value"), str) for l in labels):
            raise invalid("labels", "must be {label: [{key, value}]}")
    return s


# ----- EC2 helpers ---------------------------------------------------------------------

def numbered_key(k):
    """Sorts Filter.10 after Filter.9."""
    return [int(p) if p.isdigit() else p for p in k.split(".")]


def random_hex(n):
    return "".join(random.choice("0123456789abcdef") for _ in range(n))


def uri_encode(s, safe=""):
    return urllib.parse.quote(s, safe="-_.~" + safe)


def canonical_uri(path):
    return uri_encode(urllib.parse.unquote(path or "/"), safe="/") or "/"


def canonical_query(query):
    pairs = urllib.parse.parse_qsl(query, keep_blank_values=True)
    return "&".join(f"{uri_encode(k)}={uri_encode(v)}" for k, v in sorted(pairs))


def matches(i, name, values):
    if name == "instance-state-name":
        return i["state"] in values
    if name == "instance-id":
        return i["instanceId"] in values
    if name == "tag-key":
        return any(t["key"] in values for t in i["tags"])
    key = name[len("tag:"):]
    return any(t["key"] == key and t["value"] in values for t in i["tags"])


def advance_instance(i):
    if i.get("target"):
        i["polls_left"] -= 1
        if i["polls_left"] <= 0:
            i["state"] = i.pop("target")


def state_xml(tag, state):
    return f"<{tag}><code>{EC2_STATE_CODES[state]}</code><name>{state}</name></{tag}>"


def state_change(i, previous):
    return f"<item><instanceId>{i['instanceId']}</instanceId>{state_xml('currentState', i['state'])}{state_xml('previousState', previous)}</item>"


def instance_xml(i):
    public = i["state"] == "running"
    tags = "".join(f"<item><key>{escape(t['key'])}</key><value>{escape(t['value'])}</value></item>" for t in i["tags"])
    groups = "".join(f"<item><groupId>{escape(g)}</groupId><groupName>{escape(g)}</groupName></item>" for g in i["groups"])
    terminated = i["state"] in ("shutting-down", "terminated")
    return (
        "<item>"
        f"<instanceId>{i['instanceId']}</instanceId>"
        f"<imageId>{escape(i['imageId'])}</imageId>"
        f"{state_xml('instanceState', i['state'])}"
        f"<privateDnsName>{'' if terminated else 'ip-' + i['privateIpAddress'].replace('.', '-') + '.ec2.internal'}</privateDnsName>"
        f"<dnsName>{'ec2-' + i['publicIp'].replace('.', '-') + '.compute.amazonaws.com' if public else ''}</dnsName>"
        f"<reason/>"
        + (f"<keyName>{escape(i['keyName'])}</keyName>" if i.get("keyName") else "")
        + "<amiLaunchIndex>0</amiLaunchIndex><productCodes/>"
        f"<instanceType>{escape(i['instanceType'])}</instanceType>"
        f"<launchTime>{i['launchTime']}</launchTime>"
        f"<placement><availabilityZone>{i['availabilityZone']}</availabilityZone><groupName/><tenancy>default</tenancy></placement>"
        "<monitoring><state>disabled</state></monitoring>"
        + ("" if terminated else f"<subnetId>{i['subnetId']}</subnetId><vpcId>{i['vpcId']}</vpcId><privateIpAddress>{i['privateIpAddress']}</privateIpAddress>")
        + (f"<ipAddress>{i['publicIp']}</ipAddress>" if public else "")
        + f"<groupSet>{groups}</groupSet>"
        "<architecture>x86_64</architecture><rootDeviceType>ebs</rootDeviceType><rootDeviceName>/dev/xvda</rootDeviceName>"
        "<blockDeviceMapping/><virtualizationType>hvm</virtualizationType>"
        f"<tagSet>{tags}</tagSet>"
        "</item>"
    )


def ec2_response(action, inner):
    return (f'<?xml version="1.0" encoding="UTF-8"?>\n<{action}Response xmlns="{EC2_XMLNS}">'
            f"<requestId>{uuid.uuid4()}</requestId>{inner}</{action}Response>")


def sigv4_signature(method, path, query, header_values, body, secret, amz_date, region, service):
    """(signature, canonical request) of Signature Version 4, from the request as received:
    header_values maps each signed header's lowercase name to its received values."""
    canonical_headers = "".join(
        f"{name}:{','.join(' '.join(v.split()) for v in values)}\n"
        for name, values in sorted(header_values.items()))
    signed_headers = ";".join(sorted(header_values))
    canonical_request = "\n".join([
        method,
        canonical_uri(path),
        canonical_query(query),
        canonical_headers,
        signed_headers,
        hashlib.sha256(body).hexdigest(),
    ])
    date = amz_date[:8]
    scope = f"{date}/{region}/{service}/aws4_request"
    string_to_sign = "\n".join(["AWS4-HMAC-SHA256", amz_date, scope, hashlib.sha256(canonical_request.encode()).hexdigest()])
    key = ("AWS4" + secret).encode()
    for part in (date, region, service, "aws4_request"):
        key = hmac.new(key, part.encode(), hashlib.sha256).digest()
    return hmac.new(key, string_to_sign.encode(), hashlib.sha256).hexdigest(), canonical_request


def self_test():
    """The verifier against AWS's published example (IAM ListUsers, 2015-08-30)."""
    signature, _ = sigv4_signature(
        "GET", "/", "Action=ListUsers&Version=2010-05-08",
        {"content-type": ["application/x-www-form-urlencoded; charset=utf-8"],
         "host": ["iam.amazonaws.com"], "x-amz-date": ["20150830T123600Z"]},
        b"", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", "20150830T123600Z", "us-east-1", "iam")
    expected = "5d672d79c15b13162d9279b0855cfba6789a8edb4c82c400e06b5924a6f2b5d7"
    if signature != expected:
        print(f"self-test FAILED: {signature} != {expected}")
        return 1
    print("self-test ok")
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--self-test", action="store_true", help="check the SigV4 verifier against AWS's published example and exit")
    ap.add_argument("--port", type=int, help="loopback port; 0 picks a free one (printed)")
    ap.add_argument("--log", help="JSON-lines file receiving every request")
    ap.add_argument("--polls", type=int, default=2, help="status polls before a transition completes")
    ap.add_argument("--upcloud-username", default="standin-api")
    ap.add_argument("--upcloud-password", default="standin-secret")
    ap.add_argument("--upcloud-token", default="ucat_standin_token")
    ap.add_argument("--aws-access-key-id", default="AKIASTANDIN000000000")
    ap.add_argument("--aws-secret-access-key", default="standin/Secret+Key/0123456789abcdefghijk")
    ap.add_argument("--aws-session-token", default="", help="when set, requests must carry it")
    ap.add_argument("--aws-region", default="", help="when set, the credential scope must name it")
    ap.add_argument("--aws-invisible-polls", type=int, default=1,
                    help="describes for which a new instance is not visible yet (eventual consistency)")
    args = ap.parse_args()
    if args.self_test:
        return self_test()
    if args.port is None or not args.log:
        ap.error("--port and --log are required")
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
