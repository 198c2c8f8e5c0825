#!/usr/bin/env python3
"""A local AWS for the AWS provider's tests and `make run-aws`: moto's server on loopback,
seeded with what moto lacks and a cluster needs.

It also gives spot offerings prices of a market's shape (spot_price below) instead of moto's
one flat price, and lets a test fail an instance's status checks through tags (below).

moto answers EC2, IAM, SSM and SQS with the real wire protocols, but it has none of the public
`/aws/service/...` SSM parameters that EKS AMI aliases resolve through, and its PutParameter
refuses `/aws/` names. This launcher starts moto in process (ThreadedMotoServer) and writes
those parameters straight into moto's SSM backend, pointing at AMIs it copies from moto's
catalog under EKS's names. With --seed-cluster it also creates what a cluster's account has:
a VPC with a subnet in each of three zones and a security group, all tagged
karpenter.sh/discovery=<cluster>, an IAM role for nodes, and an SQS queue for interruption.

It prints one JSON line to stdout once ready (endpoint, region, and the ids it created), writes
the endpoint to --endpoint-file if given, and serves until SIGINT or SIGTERM.

Nothing here is part of the controller; the controller reaches this server only through
aws-sdk-go-v2 with BaseEndpoint set, as it would reach AWS.
"""

import argparse
import datetime
import json
import logging
import signal
import sys
import threading

import boto3
from moto.core import DEFAULT_ACCOUNT_ID
from moto.core.responses import ActionResult
from moto.ec2.models.instance_types import INSTANCE_TYPES
from moto.ec2.models.instances import Instance
from moto.ec2.responses.spot_instances import SpotInstances
from moto.server import ThreadedMotoServer
from moto.ssm.models import Parameter, ssm_backends

ARCHS = ("x86_64", "arm64")


def ssm_put(region, name, value):
    """Puts a parameter moto's API would refuse (an /aws/ name) into its backend."""
    backend = ssm_backends[DEFAULT_ACCOUNT_ID][region]
    versions = backend._parameters[name]
    versions.append(
        Parameter(
            account_id=DEFAULT_ACCOUNT_ID,
            name=name,
            value=value,
            parameter_type="String",
            description=None,
            allowed_pattern=None,
            keyid=None,
            last_modified_date=datetime.datetime.now(datetime.timezone.utc),
            version=len(versions) + 1,
            data_type="aws:ec2:image",
        )
    )


# moto answers every DescribeSpotPriceHistory with 0.00001, which makes every spot offering
# cost the same and the cheapest choice arbitrary (a 48-vCPU type for one pod). These
# synthetic prices keep a real market's shape: a rate by vCPU and memory that is close to
# on-demand's (m5.large 0.094, r5.large 0.126), at a spot discount that differs by zone.
SPOT_DISCOUNT = 0.35
ZONE_FACTORS = {"a": 1.0, "b": 1.08, "c": 0.94, "d": 1.03, "e": 0.97, "f": 1.05}


def spot_price(instance_type, zone):
    info = INSTANCE_TYPES.get(instance_type, {})
    vcpu = info.get("VCpuInfo", {}).get("DefaultVCpus", 2)
    gib = info.get("MemoryInfo", {}).get("SizeInMiB", 4096) / 1024
    rate = vcpu * 0.031 + gib * 0.004
    return f"{rate * SPOT_DISCOUNT * ZONE_FACTORS.get(zone[-1:], 1.0):.6f}"


def describe_spot_price_history(self):
    prices = self.ec2_backend.describe_spot_price_history(self._get_param("InstanceTypes", []), self._filters_from_querystring())
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.000Z")
    return ActionResult({"SpotPriceHistory": [
        {"InstanceType": p["InstanceType"], "ProductDescription": "Linux/UNIX (Amazon VPC)",
         "SpotPrice": spot_price(p["InstanceType"], p["Location"]), "AvailabilityZone": p["Location"], "Timestamp": now}
        for p in prices
    ]})


SpotInstances.describe_spot_price_history = describe_spot_price_history


# moto reports every running instance's status checks as passed and no scheduled events, and
# ignores DescribeInstanceStatus's status filters. A test makes an instance unhealthy the way
# EC2 would report it, through tags the emulator reads (set with CreateTags, as any tag):
#   emulator.karpenter.sh/instance-status-impaired-since  RFC 3339: the instance status check
#                                                         failed from then on
#   emulator.karpenter.sh/system-status-impaired-since    the same for the system status check
#   emulator.karpenter.sh/event-code                      a scheduled event of that code
#                                                         (instance-retirement, system-maintenance, ...)
# and the filters instance-status.status, system-status.status and event.code apply.
IMPAIRED_TAG = "emulator.karpenter.sh/%s-status-impaired-since"
EVENT_TAG = "emulator.karpenter.sh/event-code"


def _tag(instance, key):
    for t in instance.get_tags():
        if t.get("key", t.get("Key")) == key:
            return t.get("value", t.get("Value"))
    return None


def _status(check):
    def status(self):
        if self.state_code != 16:
            return {"Status": "not-applicable"}
        since = _tag(self, IMPAIRED_TAG % check)
        if since:
            return {"Status": "impaired", "Details": [{"Name": "reachability", "Status": "failed", "ImpairedSince": since}]}
        return {"Status": "ok", "Details": [{"Name": "reachability", "Status": "passed"}]}
    return property(status)


def _events(self):
    code = _tag(self, EVENT_TAG)
    if not code or self.state_code != 16:
        return []
    return [{"Code": code, "Description": "The instance is scheduled for " + code.replace("-", " "),
             "NotBefore": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.000Z")}]


_applies = Instance.applies


def _applies_with_status(self, filters):
    for f in filters or []:
        values = f["values"]
        if f["name"] == "instance-status.status" and self.instance_status.get("Status") not in values:
            return False
        if f["name"] == "system-status.status" and self.system_status.get("Status") not in values:
            return False
        if f["name"] == "event.code" and not any(e["Code"] in values for e in self.events):
            return False
    return _applies(self, filters)


Instance.instance_status = _status("instance")
Instance.system_status = _status("system")
Instance.events = property(_events)
Instance.applies = _applies_with_status


def alias_parameters(k8s, arch, release):
    """The SSM parameters an AMI alias resolves through, as EKS and Bottlerocket publish
    them, with the name each gives the AMI: the standard builds, and the accelerated ones
    (AL2023 nvidia for both architectures and neuron for x86_64, AL2's gpu build for x86_64,
    Bottlerocket's nvidia variant); (parameter, ami name) pairs."""
    out = []
    variants = ["standard", "nvidia"] + (["neuron"] if arch == "x86_64" else [])
    for variant in variants:
        al2023 = f"amazon-eks-node-al2023-{arch}-{variant}-{k8s}-{release}"
        base = f"/aws/service/eks/optimized-ami/{k8s}/amazon-linux-2023/{arch}/{variant}"
        out.append((f"{base}/recommended/image_id", al2023))
        out.append((f"{base}/{al2023}/image_id", al2023))
    al2_flavours = [("amazon-linux-2", "node"), ("amazon-linux-2-gpu", "gpu-node")] if arch == "x86_64" else [("amazon-linux-2-arm64", "arm64-node")]
    for flavour, kind in al2_flavours:
        al2 = f"amazon-eks-{kind}-{k8s}-{release}"
        out.append((f"/aws/service/eks/optimized-ami/{k8s}/{flavour}/recommended/image_id", al2))
        out.append((f"/aws/service/eks/optimized-ami/{k8s}/{flavour}/{al2}/image_id", al2))
    for suffix in ["", "-nvidia"]:
        br = f"bottlerocket-aws-k8s-{k8s}{suffix}-{arch}-v1.30.0"
        out.append((f"/aws/service/bottlerocket/aws-k8s-{k8s}{suffix}/{arch}/latest/image_id", br))
        out.append((f"/aws/service/bottlerocket/aws-k8s-{k8s}{suffix}/{arch}/1.30.0/image_id", br))
    return out


def seed_amis(ec2, region, k8s, release):
    """Copies one moto AMI per architecture under each EKS name and points the alias
    parameters at the copies; returns {ami name: id}."""
    sources = {}
    for image in ec2.describe_images(Owners=["amazon"])["Images"]:
        arch = image.get("Architecture")
        if arch in ARCHS and arch not in sources and image.get("Platform") != "windows":
            sources[arch] = image["ImageId"]
    made = {}
    for arch in ARCHS:
        for parameter, name in alias_parameters(k8s, arch, release):
            if name not in made:
                made[name] = ec2.copy_image(SourceImageId=sources[arch], SourceRegion=region, Name=name)["ImageId"]
            ssm_put(region, parameter, made[name])
    return made


def seed_cluster(session, region, cluster):
    ec2, iam, sqs = session.client("ec2"), session.client("iam"), session.client("sqs")
    tag = [{"Key": "karpenter.sh/discovery", "Value": cluster}]
    vpc = ec2.create_vpc(CidrBlock="10.0.0.0/16", TagSpecifications=[{"ResourceType": "vpc", "Tags": tag}])["Vpc"]["VpcId"]
    subnets = []
    for i, zone in enumerate(("a", "b", "c")):
        subnets.append(
            ec2.create_subnet(
                VpcId=vpc,
                CidrBlock=f"10.0.{i * 32}.0/19",
                AvailabilityZone=f"{region}{zone}",
                TagSpecifications=[{"ResourceType": "subnet", "Tags": tag + [{"Key": "Name", "Value": f"{cluster}-{zone}"}]}],
            )["Subnet"]["SubnetId"]
        )
    sg = ec2.create_security_group(
        GroupName=f"{cluster}-nodes", Description="nodes", VpcId=vpc,
        TagSpecifications=[{"ResourceType": "security-group", "Tags": tag}],
    )["GroupId"]
    role = f"KarpenterNodeRole-{cluster}"
    assume = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Principal": {"Service": "ec2.amazonaws.com"}, "Action": "sts:AssumeRole"}]}
    iam.create_role(RoleName=role, AssumeRolePolicyDocument=json.dumps(assume))
    queue = sqs.create_queue(QueueName=cluster)["QueueUrl"]
    return {"vpc": vpc, "subnets": subnets, "securityGroup": sg, "role": role, "queue": cluster, "queueURL": queue}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--port", type=int, default=0, help="port on 127.0.0.1; 0 picks a free one")
    ap.add_argument("--region", default="us-west-2")
    ap.add_argument("--kubernetes-version", default="1.37")
    ap.add_argument("--ami-release", default="v20261101", help="the release the seeded EKS AMIs are named after")
    ap.add_argument("--seed-cluster", metavar="CLUSTER", help="also create a VPC, subnets, security group, node role and queue for CLUSTER")
    ap.add_argument("--endpoint-file", help="write the endpoint URL here once ready")
    args = ap.parse_args()

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=args.port, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    ec2 = boto3.client("ec2", endpoint_url=endpoint, region_name=args.region, aws_access_key_id="test", aws_secret_access_key="test")
    ready = {"endpoint": endpoint, "region": args.region, "amis": seed_amis(ec2, args.region, args.kubernetes_version, args.ami_release)}
    if args.seed_cluster:
        clients = boto3.Session(aws_access_key_id="test", aws_secret_access_key="test", region_name=args.region)
        clients.client = (lambda orig: lambda name, **kw: orig(name, endpoint_url=endpoint, **kw))(clients.client)
        ready["cluster"] = seed_cluster(clients, args.region, args.seed_cluster)
    if args.endpoint_file:
        with open(args.endpoint_file, "w") as f:
            f.write(endpoint + "\n")
    print(json.dumps(ready), flush=True)

    done = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: done.set())
    done.wait()
    server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
