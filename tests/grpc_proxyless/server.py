"""A plain gRPC server for the proxyless test: every method answers its own name.

No protoc: a generic handler with raw bytes in and out.
Usage: server.py <port> <name> [--xds]

With --xds it is an xDS-enabled server (gRFC A36): it serves only once Shoal sends its
listener (GRPC_XDS_BOOTSTRAP), with xDS credentials (mTLS when the listener says so,
plaintext otherwise), and answers `<name> <peer>`: the client's SPIFFE ID under mTLS,
else `plaintext`.
"""

import sys
from concurrent import futures

import grpc


def peer_of(context):
    auth = context.auth_context()
    for key in ("peer_spiffe_id", "x509_subject_alternative_name"):
        for value in auth.get(key, []):
            if value.startswith(b"spiffe://"):
                return value.decode()
    return "tls" if auth.get("transport_security_type") == [b"ssl"] else "plaintext"


class AnswerName(grpc.GenericRpcHandler):
    def __init__(self, name, with_peer):
        self.name = name
        self.with_peer = with_peer

    def answer(self, request, context):
        if self.with_peer:
            return f"{self.name} {peer_of(context)}".encode()
        return self.name.encode()

    def service(self, details):
        return grpc.unary_unary_rpc_method_handler(self.answer)


def main():
    port, name = int(sys.argv[1]), sys.argv[2]
    xds = "--xds" in sys.argv[3:]
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4), xds=xds)
    server.add_generic_rpc_handlers((AnswerName(name, xds),))
    address = f"127.0.0.1:{port}"
    if xds:
        creds = grpc.xds_server_credentials(grpc.insecure_server_credentials())
        server.add_secure_port(address, creds)
    else:
        server.add_insecure_port(address)
    server.start()
    print(f"serving {name} on {port}", flush=True)
    # Bounded, in case the test that started it died without stopping it.
    server.wait_for_termination(timeout=900)


if __name__ == "__main__":
    main()
