"""The server workload: HTTP on one port, a line echo on another, each reply naming the
peer it saw, so a test can tell a connection the server's sidecar made (from 127.0.0.6)
from one that bypassed it."""

import http.server
import socketserver
import sys
import threading


class Http(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = f"server peer={self.client_address[0]} path={self.path}\n".encode()
        self.send_response(200)
        self.send_header("content-type", "text/plain")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


class Echo(socketserver.StreamRequestHandler):
    def handle(self):
        line = self.rfile.readline().decode().strip()
        self.wfile.write(f"echo peer={self.client_address[0]} {line}\n".encode())


class ThreadingTcp(socketserver.ThreadingTCPServer):
    allow_reuse_address = True
    daemon_threads = True


def main():
    http_port, tcp_port = int(sys.argv[1]), int(sys.argv[2])
    http_server = http.server.ThreadingHTTPServer(("0.0.0.0", http_port), Http)
    tcp_server = ThreadingTcp(("0.0.0.0", tcp_port), Echo)
    threading.Thread(target=tcp_server.serve_forever, daemon=True).start()
    print(f"serving http on {http_port}, echo on {tcp_port}", flush=True)
    http_server.serve_forever()


if __name__ == "__main__":
    main()
