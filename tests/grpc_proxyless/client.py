"""A proxyless gRPC client: one channel to an `xds:///` target, configured by Shoal over
xDS (GRPC_XDS_BOOTSTRAP), calling it until stopped.

Prints one line per call: `ok <server name>` or `err <status code> <details>`.
Usage: client.py <target> [<metadata key>=<value> ...]
"""

import sys
import time

import grpc

CALL_TIMEOUT_S = 20
# Bounded, in case the test that started it died without stopping it.
LIFETIME_S = 900


def main():
    target = sys.argv[1]
    metadata = tuple(tuple(arg.split("=", 1)) for arg in sys.argv[2:])
    channel = grpc.insecure_channel(target)
    who = channel.unary_unary("/shoal.test.Echo/Who")
    deadline = time.monotonic() + LIFETIME_S
    while time.monotonic() < deadline:
        try:
            reply = who(b"", timeout=CALL_TIMEOUT_S, metadata=metadata)
            print(f"ok {reply.decode()}", flush=True)
        except grpc.RpcError as e:
            details = (e.details() or "").replace("\n", " ")
            print(f"err {e.code().name} {details}", flush=True)
        time.sleep(0.05)


if __name__ == "__main__":
    main()
