"""An in-process fake stagger.v1.RetryCoordinator (with the gRPC health
service) for the client's tests: gRPC on a loopback port or a Unix socket,
answering from replaceable functions and recording every request with the
time the call had left."""

import threading
from concurrent import futures
from typing import Callable, List, Tuple

import grpc

from stagger.proto import (coordinator_pb2 as pb, coordinator_pb2_grpc,
                           health_pb2, health_pb2_grpc)

Answer = Callable[[object, grpc.ServicerContext], object]


def admitted(req, ctx):
    return pb.AdmitResponse(decision=pb.Decision(
        verdict=pb.PROCEED, reason=pb.ADMITTED, attempt=req.attempt,
        admission=42))


def reported(req, ctx):
    if req.outcome == pb.SUCCESS:
        d = pb.Decision(verdict=pb.DONE, reason=pb.SUCCEEDED, attempt=req.attempt)
    else:
        d = pb.Decision(verdict=pb.PROCEED, reason=pb.BACKOFF,
                        attempt=req.attempt + 1)
        d.delay.FromMilliseconds(200)
    return pb.ReportResponse(decision=d)


class FakeCoordinator(coordinator_pb2_grpc.RetryCoordinatorServicer,
                      health_pb2_grpc.HealthServicer):
    def __init__(self, address: str = "127.0.0.1:0") -> None:
        self.admits: List[Tuple[pb.AdmitRequest, float]] = []
        self.reports: List[Tuple[pb.ReportRequest, float]] = []
        self.admit_answer: Answer = admitted
        self.report_answer: Answer = reported
        self.health = health_pb2.HealthCheckResponse.SERVING
        self.release = threading.Event()  # ends every held call
        self._server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
        coordinator_pb2_grpc.add_RetryCoordinatorServicer_to_server(self, self._server)
        health_pb2_grpc.add_HealthServicer_to_server(self, self._server)
        port = self._server.add_insecure_port(address)
        self.target = ("127.0.0.1:%d" % port if address.startswith("127.")
                       else address)
        self._server.start()

    def Admit(self, req, ctx):
        self.admits.append((req, ctx.time_remaining()))
        return self.admit_answer(req, ctx)

    def Report(self, req, ctx):
        self.reports.append((req, ctx.time_remaining()))
        return self.report_answer(req, ctx)

    def Check(self, req, ctx):
        return health_pb2.HealthCheckResponse(status=self.health)

    def hold(self, req, ctx):
        """An answer that never comes (until release is set)."""
        self.release.wait(30)
        return admitted(req, ctx)

    def stop(self) -> None:
        self.release.set()
        self._server.stop(None).wait(10)
