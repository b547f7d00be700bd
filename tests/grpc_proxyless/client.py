"""A proxyless gRPC client: one channel to an `xds:///` target, configured by Shoal over
xDS (GRPC_XDS_BOOTSTRAP), calling it until stopped.

Prints one line per call: `ok <answer>` or `err <status code> <details>`.
Usage: client.py [--xds-creds] <target> [<metadata key>=<value> ...]

--xds-creds: the channel uses xDS credentials (mTLS where Shoal's clusters say so,
plaintext otherwise); without it, insecure credentials (the target may then also be a
plain `host:port`).
"""

import sys
import time

import grpc
import grpc.experimental

CALL_TIMEOUT_S = 20
# Bounded, in case the test that started it died without stopping it.
LIFETIME_S = 900


def main():
    args = sys.argv[1:]
    xds_creds = "--xds-creds" in args
    args = [a for a in args if not a.startswith("--")]
    target = args[0]
    metadata = tuple(tuple(arg.split("=", 1)) for arg in args[1:])
    if xds_creds:
        fallback = grpc.experimental.insecure_channel_credentials()
        creds = grpc.xds_channel_credentials(fallback)
        channel = grpc.secure_channel(target, creds)
    else:
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
