"""UpCloud API 1.3 as the stand-in (cloud_standin.py) checks and answers it: the request
shapes of the operations the upcloud provider uses, written down once as tables of fields
(kind, required, allowed values), their checks, the routes, and the shape of a server's
details in answers. From the API 1.3 documentation (chapter "Servers") and the request
types of UpCloud's own SDK.
"""

import datetime
import random
import re
import uuid


def now_utc():
    return datetime.datetime.now(datetime.timezone.utc)


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
