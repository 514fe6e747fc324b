module github.com/spindle-ps/spindle

go 1.26

require (
	github.com/apache/thrift v0.17.0 // indirect
	github.com/pebbe/zmq4 v1.4.0 // indirect
	github.com/sirupsen/logrus v1.10.2 // indirect
	go.uber.org/goleak v1.3.0 // indirect
	golang.org/x/sys v0.13.0 // indirect
)
