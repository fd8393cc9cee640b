module stagger.dev/stagger

// The versions Debian 12 ships (golang-google-grpc-dev 1.33.3,
// golang-google-protobuf-dev 1.28.1), which CI builds and tests against
// offline (client/go/README.md, "Building").
go 1.19

require (
	google.golang.org/grpc v1.33.3
	google.golang.org/protobuf v1.28.1
)
