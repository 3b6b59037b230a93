#!/usr/bin/env python3
"""A local stand-in for UpCloud's API 1.3 (JSON, under /1.3/), for tests on machines that
cannot reach it. Python standard library only. (The aws provider is tested against moto:
tests/standins/moto_ec2.py.)

It keeps its servers in memory and CHECKS every request against the API's published shapes
(API 1.3, chapter "Servers", and UpCloud's own SDK request types), written down once below
as tables (ROUTES, CREATE_SERVER, STORAGE_DEVICE, ...):

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
import datetime
import hmac
import json
import random
import re
import sys
import threading
import urllib.parse
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

ZONES = {
    "fi-hel1", "fi-hel2", "de-fra1", "nl-ams1", "uk-lon1", "us-chi1", "us-nyc1",
    "us-sjo1", "sg-sin1", "au-syd1", "es-mad1", "pl-waw1", "se-sto1", "dk-cph1",
}
# Public templates (the OS disk of a new server is a clone of one of them).
TEMPLATES = {
    "01000000-0000-4000-8000-000030240200": "Ubuntu Server 24.04 LTS (Noble Numbat)",
    "01000000-0000-4000-8000-000030220200": "Ubuntu Server 22.04 LTS (Jammy Jellyfish)",
    "01000000-0000-4000-8000-000020070100": "Debian GNU/Linux 12 (Bookworm)",
}
PLAN = re.compile(r"^(DEV-|HICPU-|HIMEM-)?\d+xCPU-\d+GB(-\d+GB)?$")
HOSTNAME = re.compile(r"^(?=.{1,128}$)[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$")
UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
USERNAME = re.compile(r"^[a-z_][a-z0-9_-]{0,31}$")
SSH_KEY = re.compile(r"^(ssh-(rsa|ed25519|dss)|ecdsa-sha2-\S+|sk-\S+) \S+")
LABEL_KEY = re.compile(r"^[A-Za-z0-9-][A-Za-z0-9_-]{1,31}$")  # 2-32 characters, not starting with "_"
YES_NO = ("yes", "no")


class ApiError(Exception):
    def __init__(self, status, code, message):
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


def missing(field):
    return ApiError(400, f"{field.upper()}_MISSING", f"The parameter {field} is missing.")


def invalid(field, why):
    return ApiError(400, f"{field.upper()}_INVALID", f"The parameter {field} is invalid: {why}")


# ----- the published request shapes ------------------------------------------------------
# A field is (kind, required, check): kind "string" | "integer" | "object" | "list" (a
# wrapper {item_name: [...]}) ; check: a set of allowed values, a regex, an (int, int) range,
# a nested field table (objects), or (item_name, item table or check) for lists.

def field(kind, required=False, check=None):
    return (kind, required, check)


IP_ADDRESS = {
    "family": field("string", True, {"IPv4", "IPv6"}),
    "address": field("string"),
}
INTERFACE = {
    "type": field("string", True, {"public", "utility", "private"}),
    "ip_addresses": field("list", True, ("ip_address", IP_ADDRESS)),
    "network": field("string", False, UUID),
    "source_ip_filtering": field("string", False, YES_NO),
    "bootable": field("string", False, YES_NO),
    "index": field("integer", False, (1, 10)),
}
NETWORKING = {"interfaces": field("list", True, ("interface", INTERFACE))}
BACKUP_RULE = {
    "interval": field("string", True, {"daily", "mon", "tue", "wed", "thu", "fri", "sat", "sun"}),
    "time": field("string", True, re.compile(r"^([01]\d|2[0-3])[0-5]\d$")),
    "retention": field("integer", True, (1, 1095)),
}
STORAGE_DEVICE = {
    "action": field("string", True, {"create", "clone", "attach"}),
    "storage": field("string", False, UUID),
    "title": field("string", False, re.compile(r"^.{1,255}$")),
    "size": field("integer", False, (1, 4096)),
    "tier": field("string", False, {"maxiops", "standard", "hdd"}),
    "type": field("string", False, {"disk", "cdrom"}),
    "address": field("string", False, re.compile(r"^(ide|scsi|virtio)(:\d+(:\d+)?)?$")),
    "encrypted": field("string", False, YES_NO),
    "backup_rule": field("object", False, BACKUP_RULE),
}
LOGIN_USER = {
    "username": field("string", False, USERNAME),
    "create_password": field("string", False, YES_NO),
    "ssh_keys": field("list", False, ("ssh_key", SSH_KEY)),
}
LABEL = {
    "key": field("string", True, LABEL_KEY),
    "value": field("string", True, re.compile(r"^.{0,255}$")),
}
CREATE_SERVER = {
    "zone": field("string", True, ZONES),
    "title": field("string", True, re.compile(r"^.{1,255}$")),
    "hostname": field("string", True, HOSTNAME),
    "storage_devices": field("list", True, ("storage_device", STORAGE_DEVICE)),
    "plan": field("string", False, PLAN),
    "core_number": field("string", False, re.compile(r"^\d+$")),
    "memory_amount": field("string", False, re.compile(r"^\d+$")),
    "avoid_host": field("integer"),
    "host": field("integer"),
    "boot_order": field("string", False, {"disk", "cdrom", "network", "disk,cdrom", "cdrom,disk", "disk,network", "network,disk"}),
    "firewall": field("string", False, {"on", "off"}),
    "labels": field("list", False, ("label", LABEL)),
    "login_user": field("object", False, LOGIN_USER),
    "metadata": field("string", False, YES_NO),
    "networking": field("object", False, NETWORKING),
    "nic_model": field("string", False, {"e1000", "virtio", "rtl8139"}),
    "password_delivery": field("string", False, {"none", "email", "sms"}),
    "server_group": field("string", False, UUID),
    "simple_backup": field("string", False, re.compile(r"^(no|([01]\d|2[0-3])[0-5]\d,(dailies|weeklies|monthlies))$")),
    "timezone": field("string"),
    "user_data": field("string"),
    "video_model": field("string", False, {"vga", "cirrus"}),
    "remote_access_enabled": field("string", False, YES_NO),
    "remote_access_type": field("string", False, {"vnc", "spice"}),
    "remote_access_password": field("string"),
}
STOP_SERVER = {
    "stop_type": field("string", False, {"soft", "hard"}),
    "timeout": field("string", False, re.compile(r"^([1-9]\d?|[1-5]\d\d|600)$")),  # 1-600 s
}
START_SERVER = {"host": field("integer"), "avoid_host": field("integer")}


def check_fields(value, table, where):
    """`value` against a field table: every key known, required ones present, each of its
    kind and allowed values. Raises ApiError naming the field."""
    if not isinstance(value, dict):
        raise invalid(where, "must be an object")
    for name in value:
        if name not in table:
            raise ApiError(400, f"{name.upper()}_UNKNOWN", f"The parameter {name} is not a known attribute of {where}.")
    for name, (kind, required, check) in table.items():
        if name not in value:
            if required:
                raise missing(name)
            continue
        check_value(value[name], kind, check, name)


def check_value(value, kind, check, name):
    if kind == "string":
        if not isinstance(value, str):
            raise invalid(name, "must be a string")
        if isinstance(check, (set, tuple)) and value not in check:
            raise invalid(name, f"must be one of {', '.join(sorted(check))}")
        if isinstance(check, re.Pattern) and not check.match(value):
            raise invalid(name, f"{value!r} is not of the accepted form")
    elif kind == "integer":
        if not isinstance(value, int) or isinstance(value, bool):
            raise invalid(name, "must be an integer")
        if check and not check[0] <= value <= check[1]:
            raise invalid(name, f"must be from {check[0]} to {check[1]}")
    elif kind == "object":
        check_fields(value, check, name)
    elif kind == "list":
        item_name, item_check = check
        if not isinstance(value, dict) or set(value) != {item_name} or not isinstance(value[item_name], list):
            raise invalid(name, f"must be {{\"{item_name}\": [...]}}")
        for item in value[item_name]:
            if isinstance(item_check, dict):
                check_fields(item, item_check, item_name)
            else:
                check_value(item, "string", item_check, item_name)


def validate_create(body):
    """The "Create server" body: the table, then the rules between fields."""
    if not isinstance(body, dict) or set(body) != {"server"}:
        raise missing("server")
    s = body["server"]
    check_fields(s, CREATE_SERVER, "server")
    if "plan" not in s and not ("core_number" in s and "memory_amount" in s):
        raise missing("plan")
    devices = s["storage_devices"]["storage_device"]
    if not devices:
        raise invalid("storage_device", "at least one storage device is needed")
    for dev in devices:
        if dev["action"] in ("clone", "attach") and "storage" not in dev:
            raise missing("storage")
        if dev["action"] == "clone" and dev["storage"] not in TEMPLATES:
            raise ApiError(404, "STORAGE_NOT_FOUND", f"The storage {dev['storage']} does not exist.")
        if dev["action"] in ("clone", "create"):
            for name in ("title", "size"):
                if name not in dev:
                    raise missing(name)
    for interface in (s.get("networking") or {}).get("interfaces", {}).get("interface", []):
        if interface["type"] == "private" and "network" not in interface:
            raise missing("network")
    return s


# ----- the routes ------------------------------------------------------------------------
# (path pattern under /1.3, {method: handler name}); {uuid} matches a server UUID.
ROUTES = [
    (re.compile(r"^/server/?$"), {"GET": "list_servers", "POST": "create_server"}),
    (re.compile(r"^/server/(?P<uuid>[^/]+)/?$"), {"GET": "server_details", "DELETE": "delete_server"}),
    (re.compile(r"^/server/(?P<uuid>[^/]+)/start/?$"), {"POST": "start_server"}),
    (re.compile(r"^/server/(?P<uuid>[^/]+)/stop/?$"), {"POST": "stop_server"}),
]
# The fields of a server in GET /server (the rest only in its details).
SUMMARY_FIELDS = ("uuid", "hostname", "title", "zone", "plan", "state", "core_number", "memory_amount",
                  "labels", "tags", "license", "created", "host", "progress", "plan_ipv4_bytes",
                  "plan_ipv6_bytes", "simple_backup")
INTERNAL_FIELDS = ("target", "polls_left")


def now_utc():
    return datetime.datetime.now(datetime.timezone.utc)


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


def new_server(server, n, polls):
    """A created server's details, as GET /server/{uuid} shows them."""
    plan = server.get("plan", "custom")
    m = re.match(r"^(?:[A-Z]+-)?(\d+)xCPU-(\d+)GB", plan)
    cores, memory = (m.group(1), str(int(m.group(2)) * 1024)) if m else (server["core_number"], server["memory_amount"])
    interfaces = (server.get("networking") or {}).get("interfaces", {}).get("interface")
    if interfaces is None:  # the API's default: public IPv4, utility IPv4, public IPv6
        interfaces = [{"type": "public", "ip_addresses": {"ip_address": [{"family": "IPv4"}, {"family": "IPv6"}]}},
                      {"type": "utility", "ip_addresses": {"ip_address": [{"family": "IPv4"}]}}]
    addresses, nics = [], []
    for index, interface in enumerate(interfaces, start=1):
        nic_addresses = []
        for ip in interface["ip_addresses"]["ip_address"]:
            if ip["family"] == "IPv6":
                address = f"2a04:3540:1000:310::{n:x}:{index}"
            elif interface["type"] == "public":
                address = f"94.237.{10 + n % 200}.{10 + index}"
            else:
                address = f"10.{n % 250}.{index}.{10 + n % 200}"
            addresses.append({"access": interface["type"], "address": address, "family": ip["family"]})
            nic_addresses.append({"address": address, "family": ip["family"], "floating": "no"})
        nics.append({"index": index, "ip_addresses": {"ip_address": nic_addresses}, "mac": f"de:ff:00:{n % 256:02x}:{index:02x}:01",
                     "network": "03" + str(uuid.uuid4())[2:], "type": interface["type"], "bootable": "no",
                     "source_ip_filtering": "yes"})
    storages = [{
        "address": f"virtio:{i}",
        "part_of_plan": "yes" if i == 0 else "no",
        "storage": "01" + str(uuid.uuid4())[2:],
        "storage_size": dev.get("size", 10),
        "storage_tier": dev.get("tier", "maxiops"),
        "storage_title": dev.get("title", ""),
        "type": dev.get("type", "disk"),
        "boot_disk": "1" if i == 0 else "0",
    } for i, dev in enumerate(server["storage_devices"]["storage_device"])]
    return {
        "uuid": "00" + str(uuid.uuid4())[2:],
        "hostname": server["hostname"],
        "title": server["title"],
        "zone": server["zone"],
        "plan": plan,
        "core_number": cores,
        "memory_amount": memory,
        "state": "maintenance",
        "progress": "0",
        "target": "started",
        "polls_left": polls,
        "created": int(now_utc().timestamp()),
        "host": random.randint(10**9, 10**10),
        "license": 0,
        "boot_order": server.get("boot_order", "disk"),
        "firewall": server.get("firewall", "off"),
        "metadata": server.get("metadata", "no"),
        "nic_model": server.get("nic_model", "virtio"),
        "timezone": server.get("timezone", "UTC"),
        "video_model": server.get("video_model", "vga"),
        "remote_access_enabled": server.get("remote_access_enabled", "no"),
        "labels": server.get("labels", {"label": []}),
        "tags": {"tag": []},
        "simple_backup": server.get("simple_backup", "no"),
        "ip_addresses": {"ip_address": addresses},
        "networking": {"interfaces": {"interface": nics}},
        "storage_devices": {"storage_device": storages},
    }


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
