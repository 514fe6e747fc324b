package hrpc

import (
	"errors"
	"io/fs"
	"strings"

	pb "github.com/spindle-ps/spindle/internal/hadoop/proto"
)

// ErrClosed is returned by calls on a connection that Close closed.
var ErrClosed = errors.New("hrpc: connection closed")

// RemoteError is an error the server reported in a response header: a
// Java exception class and its message. Fatal errors close the connection.
type RemoteError struct {
	Method  string // the RPC method, or "" for connection-level errors
	Class   string // the Java exception class, e.g. org.apache.hadoop.security.AccessControlException
	Message string // the server's message; may include a Java stack trace
	Fatal   bool   // the server closed the connection (status FATAL)
	Detail  pb.RpcResponseHeaderProto_RpcErrorCodeProto
}

func (e *RemoteError) Error() string {
	var b strings.Builder
	b.WriteString("hrpc: ")
	if e.Method != "" {
		b.WriteString(e.Method)
		b.WriteString(": ")
	}
	b.WriteString(e.Class)
	if msg, _, _ := strings.Cut(e.Message, "\n"); msg != "" {
		b.WriteString(": ")
		b.WriteString(msg)
	}
	return b.String()
}

// ShortClass is the exception class without its package.
func (e *RemoteError) ShortClass() string {
	c := e.Class
	if i := strings.LastIndexByte(c, '.'); i >= 0 {
		c = c[i+1:]
	}
	if i := strings.LastIndexByte(c, '$'); i >= 0 {
		c = c[i+1:]
	}
	return c
}

// Is maps well-known Hadoop exceptions onto io/fs errors.
func (e *RemoteError) Is(target error) bool {
	switch target {
	case fs.ErrNotExist:
		return e.ShortClass() == "FileNotFoundException"
	case fs.ErrPermission:
		switch e.ShortClass() {
		case "AccessControlException", "AuthorizationException", "InvalidToken", "SaslException":
			return true
		}
	case fs.ErrExist:
		return e.ShortClass() == "FileAlreadyExistsException"
	}
	return false
}

func remoteError(method string, h *pb.RpcResponseHeaderProto) *RemoteError {
	return &RemoteError{
		Method:  method,
		Class:   h.GetExceptionClassName(),
		Message: h.GetErrorMsg(),
		Fatal:   h.GetStatus() == pb.RpcResponseHeaderProto_FATAL,
		Detail:  h.GetErrorDetail(),
	}
}
