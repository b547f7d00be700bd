"""A plain gRPC server for the proxyless test: every method answers its own name.

No protoc: a generic handler with raw bytes in and out.
Usage: server.py <port> <name>
"""

import sys
from concurrent import futures

import grpc


class AnswerName(grpc.GenericRpcHandler):
    def __init__(self, name):
        self.reply = name.encode()

    def service(self, details):
        return grpc.unary_unary_rpc_method_handler(lambda request, context: self.reply)


def main():
    port, name = int(sys.argv[1]), sys.argv[2]
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    server.add_generic_rpc_handlers((AnswerName(name),))
    server.add_insecure_port(f"127.0.0.1:{port}")
    server.start()
    print(f"serving {name} on {port}", flush=True)
    # Bounded, in case the test that started it died without stopping it.
    server.wait_for_termination(timeout=900)


if __name__ == "__main__":
    main()
