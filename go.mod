module github.com/spindle-ps/spindle

go 1.26

require (
	github.com/apache/thrift v0.17.0
	github.com/colinmarc/hdfs/v2 v2.4.0
	github.com/jcmturner/gokrb5/v8 v8.4.4
	github.com/klauspost/compress v1.20.3
	github.com/pebbe/zmq4 v1.4.0
	github.com/sirupsen/logrus v1.10.2
	go.uber.org/goleak v1.3.0
	golang.org/x/sys v0.13.0
	google.golang.org/protobuf v1.31.0
)

require (
	github.com/hashicorp/go-uuid v1.0.3 // indirect
	github.com/jcmturner/aescts/v2 v2.0.0 // indirect
	github.com/jcmturner/dnsutils/v2 v2.0.0 // indirect
	github.com/jcmturner/gofork v1.7.6 // indirect
	github.com/jcmturner/goidentity/v6 v6.0.1 // indirect
	github.com/jcmturner/rpc/v2 v2.0.3 // indirect
	golang.org/x/crypto v0.11.0 // indirect
	golang.org/x/net v0.12.0 // indirect
)
