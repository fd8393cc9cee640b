"""The generated protobuf and gRPC modules, imported once, with a clear
error when they were not generated.

They are generated at build time (client/python/CMakeLists.txt) into
<build>/client/python/gen/, which must be on sys.path next to
client/python/ (PYTHONPATH=client/python:<build>/client/python/gen):
  coordinator_pb2 / coordinator_pb2_grpc   stagger.v1 (coordinator.proto)
  health_pb2 / health_pb2_grpc             gRPC's grpc.health.v1 service,
                                           as module stagger.grpc_health.v1
"""

try:
    from stagger.v1 import coordinator_pb2, coordinator_pb2_grpc
    from stagger.grpc_health.v1 import health_pb2, health_pb2_grpc
except ImportError as e:  # pragma: no cover - the message is the point
    raise ImportError(
        "stagger: the generated modules (stagger.v1.coordinator_pb2, ...) are "
        "missing: build the CMake target stagger_python and put "
        "<build>/client/python/gen on PYTHONPATH next to client/python "
        "(client/python/README.md): %s" % e) from e

__all__ = ["coordinator_pb2", "coordinator_pb2_grpc", "health_pb2",
           "health_pb2_grpc"]
