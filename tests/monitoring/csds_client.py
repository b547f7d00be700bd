"""A real grpcio client of CSDS (envoy.service.status.v3.ClientStatusDiscoveryService),
its messages and stubs from PyPI's xds-protos.

Usage: csds_client.py <host:port> <node id>
Calls FetchClientStatus with no node matcher, then StreamClientStatus with two requests:
one matching <node id> exactly, one matching no proxy. Prints one JSON object:
{"fetch": <response>, "stream": [<response>, ...]}, each response as protobuf's JSON
mapping with the proto field names (enums by name).
"""

import json
import sys

import grpc
from envoy.service.status.v3 import csds_pb2, csds_pb2_grpc
from envoy.type.matcher.v3 import node_pb2, string_pb2
from google.protobuf import json_format

CALL_TIMEOUT_S = 20


def request(**pattern):
    """A request for the proxies whose node ID matches `pattern` (a StringMatcher's)."""
    matcher = node_pb2.NodeMatcher(node_id=string_pb2.StringMatcher(**pattern))
    return csds_pb2.ClientStatusRequest(node_matchers=[matcher])


def as_json(message):
    return json_format.MessageToDict(message, preserving_proto_field_name=True)


def main():
    target, node_id = sys.argv[1], sys.argv[2]
    # An edge answers for all its proxies in one message, over gRPC's default 4 MiB
    # receive limit from some thousands of proxies on.
    options = [("grpc.max_receive_message_length", -1)]
    with grpc.insecure_channel(target, options=options) as channel:
        stub = csds_pb2_grpc.ClientStatusDiscoveryServiceStub(channel)
        fetched = stub.FetchClientStatus(
            csds_pb2.ClientStatusRequest(), timeout=CALL_TIMEOUT_S
        )
        requests = [request(exact=node_id), request(prefix="no-such-proxy~")]
        streamed = list(stub.StreamClientStatus(iter(requests), timeout=CALL_TIMEOUT_S))
    print(json.dumps({"fetch": as_json(fetched), "stream": [as_json(r) for r in streamed]}))


if __name__ == "__main__":
    main()
