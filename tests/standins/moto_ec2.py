#!/usr/bin/env python3
"""moto's AWS emulator in server mode on a free loopback port, with authentication on,
for the aws provider's tests (moto from PyPI: `pip install 'moto[server]'`).

moto accepts any credentials unless its IAM authentication is enabled; here it is, so a
request signed with an unknown key or the wrong secret is refused (AuthFailure), and the
signature is checked by moto (which recomputes it with botocore) of a request that the
`aws` CLI signed: neither side is this project's code.

At start, before authentication is switched on, it creates an IAM user `provisioning` with
an access key and an inline policy allowing EC2, and a role of the same name the user may
assume; then it assumes that role (through STS) for temporary credentials with a session
token, and creates a security group and the key pair `deploy` in the region given with
--region (moto checks that those named by RunInstances exist). It prints one JSON line on stdout and serves until it is
killed or stdin closes:

    {"endpoint": "http://127.0.0.1:PORT", "security_group_id": "sg-...",
     "user": {"access_key_id": ..., "secret_access_key": ...},
     "session": {"access_key_id": ..., "secret_access_key": ..., "session_token": ...}}
"""

import argparse
import json
import sys

import boto3
from moto import settings
from moto.server import ThreadedMotoServer

ACCOUNT = "123456789012"  # moto's default account
NAME = "provisioning"
POLICY = json.dumps({"Version": "2012-10-17", "Statement": [
    {"Effect": "Allow", "Action": ["ec2:*", "sts:AssumeRole"], "Resource": "*"}]})
TRUST = json.dumps({"Version": "2012-10-17", "Statement": [
    {"Effect": "Allow", "Principal": {"AWS": f"arn:aws:iam::{ACCOUNT}:user/{NAME}"}, "Action": "sts:AssumeRole"}]})


def client(service, endpoint, key_id="setup", secret="setup", region="us-east-1"):
    return boto3.client(service, endpoint_url=endpoint, region_name=region,
                        aws_access_key_id=key_id, aws_secret_access_key=secret)


def main():
    args = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    args.add_argument("--region", default="us-east-1", help="where the security group is created")
    region = args.parse_args().region
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    iam = client("iam", endpoint)
    iam.create_user(UserName=NAME)
    iam.put_user_policy(UserName=NAME, PolicyName="ec2", PolicyDocument=POLICY)
    key = iam.create_access_key(UserName=NAME)["AccessKey"]
    iam.create_role(RoleName=NAME, AssumeRolePolicyDocument=TRUST)
    iam.put_role_policy(RoleName=NAME, PolicyName="ec2", PolicyDocument=POLICY)
    settings.INITIAL_NO_AUTH_ACTION_COUNT = 0  # from now on every request is authenticated
    sts = client("sts", endpoint, key["AccessKeyId"], key["SecretAccessKey"])
    role = f"arn:aws:iam::{ACCOUNT}:role/{NAME}"
    session = sts.assume_role(RoleArn=role, RoleSessionName="tests")["Credentials"]
    ec2 = client("ec2", endpoint, key["AccessKeyId"], key["SecretAccessKey"], region)
    group = ec2.create_security_group(GroupName=NAME, Description="ssh from the daemon")["GroupId"]
    ec2.create_key_pair(KeyName="deploy")
    print(json.dumps({
        "endpoint": endpoint,
        "security_group_id": group,
        "user": {"access_key_id": key["AccessKeyId"], "secret_access_key": key["SecretAccessKey"]},
        "session": {"access_key_id": session["AccessKeyId"], "secret_access_key": session["SecretAccessKey"],
                    "session_token": session["SessionToken"]},
    }), flush=True)
    sys.stdin.read()  # until the test's end closes it (or kills this process)
    server.stop()


if __name__ == "__main__":
    sys.exit(main())
