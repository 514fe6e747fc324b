package tokenpb

import (
	"errors"
	"fmt"

	"google.golang.org/protobuf/proto"
)

// ErrIdentifier reports identifier bytes that are not a valid token identifier.
var ErrIdentifier = errors.New("tokenpb: malformed token identifier")

// maxIdentifierSize bounds the input of the Parse functions. Real
// identifiers are tens of bytes.
const maxIdentifierSize = 1 << 20

// ApplicationID identifies a YARN application.
type ApplicationID struct {
	ClusterTimestamp int64 // ResourceManager start time, ms since the epoch
	ID               int32
}

// String returns the form "application_<clusterTimestamp>_<id, 4+ digits>".
func (a ApplicationID) String() string {
	return fmt.Sprintf("application_%d_%04d", a.ClusterTimestamp, a.ID)
}

// AttemptID identifies one attempt of a YARN application.
type AttemptID struct {
	Application ApplicationID
	Attempt     int32
}

// String returns the form
// "appattempt_<clusterTimestamp>_<id, 4+ digits>_<attempt, 6+ digits>".
func (a AttemptID) String() string {
	return fmt.Sprintf("appattempt_%d_%04d_%06d", a.Application.ClusterTimestamp, a.Application.ID, a.Attempt)
}

// AMRMIdentifier is a decoded AMRMTokenIdentifierProto (token kind
// "YARN_AM_RM_TOKEN").
type AMRMIdentifier struct {
	ApplicationID ApplicationID
	Attempt       int32
	KeyID         int32 // -1 when absent, as in Hadoop
}

// AttemptID returns the attempt the token was issued to.
func (a AMRMIdentifier) AttemptID() AttemptID {
	return AttemptID{Application: a.ApplicationID, Attempt: a.Attempt}
}

// AttemptString returns the application attempt id in Hadoop's string form,
// "appattempt_<ts>_<id 4 digits>_<attempt 6 digits>". This is the user a
// TOKEN-authenticated connection with this token runs as.
func (a AMRMIdentifier) AttemptString() string {
	return a.AttemptID().String()
}

// NMIdentifier is a decoded NMTokenIdentifierProto (token kind "NMToken").
type NMIdentifier struct {
	ApplicationID ApplicationID
	Attempt       int32
	NodeHost      string
	NodePort      int32
	AppSubmitter  string
	KeyID         int32 // -1 when absent, as in Hadoop
}

// AttemptID returns the attempt the token was issued to.
func (n NMIdentifier) AttemptID() AttemptID {
	return AttemptID{Application: n.ApplicationID, Attempt: n.Attempt}
}

// AttemptString returns the application attempt id in Hadoop's string form;
// see [AMRMIdentifier.AttemptString].
func (n NMIdentifier) AttemptString() string {
	return n.AttemptID().String()
}

func unmarshal(b []byte, m proto.Message) error {
	if len(b) > maxIdentifierSize {
		return fmt.Errorf("%w: %d bytes", ErrIdentifier, len(b))
	}
	if err := proto.Unmarshal(b, m); err != nil {
		return fmt.Errorf("%w: %w", ErrIdentifier, err)
	}
	return nil
}

func attemptFromProto(p *ApplicationAttemptIdProto) (ApplicationID, int32) {
	app := p.GetApplicationId()
	return ApplicationID{ClusterTimestamp: app.GetClusterTimestamp(), ID: app.GetId()}, p.GetAttemptId()
}

func attemptToProto(app ApplicationID, attempt int32) *ApplicationAttemptIdProto {
	return &ApplicationAttemptIdProto{
		ApplicationId: &ApplicationIdProto{Id: proto.Int32(app.ID), ClusterTimestamp: proto.Int64(app.ClusterTimestamp)},
		AttemptId:     proto.Int32(attempt),
	}
}

// ParseAMRMIdentifier decodes the identifier of a YARN_AM_RM_TOKEN.
func ParseAMRMIdentifier(b []byte) (AMRMIdentifier, error) {
	var p AMRMTokenIdentifierProto
	if err := unmarshal(b, &p); err != nil {
		return AMRMIdentifier{}, err
	}
	app, attempt := attemptFromProto(p.GetAppAttemptId())
	return AMRMIdentifier{ApplicationID: app, Attempt: attempt, KeyID: p.GetKeyId()}, nil
}

// Marshal encodes a as Hadoop's AMRMTokenIdentifier.getBytes does.
func (a AMRMIdentifier) Marshal() ([]byte, error) {
	return proto.Marshal(&AMRMTokenIdentifierProto{
		AppAttemptId: attemptToProto(a.ApplicationID, a.Attempt),
		KeyId:        proto.Int32(a.KeyID),
	})
}

// ParseNMIdentifier decodes the identifier of an NMToken.
func ParseNMIdentifier(b []byte) (NMIdentifier, error) {
	var p NMTokenIdentifierProto
	if err := unmarshal(b, &p); err != nil {
		return NMIdentifier{}, err
	}
	app, attempt := attemptFromProto(p.GetAppAttemptId())
	return NMIdentifier{
		ApplicationID: app,
		Attempt:       attempt,
		NodeHost:      p.GetNodeId().GetHost(),
		NodePort:      p.GetNodeId().GetPort(),
		AppSubmitter:  p.GetAppSubmitter(),
		KeyID:         p.GetKeyId(),
	}, nil
}

// Marshal encodes n as Hadoop's NMTokenIdentifier.getBytes does.
func (n NMIdentifier) Marshal() ([]byte, error) {
	return proto.Marshal(&NMTokenIdentifierProto{
		AppAttemptId: attemptToProto(n.ApplicationID, n.Attempt),
		NodeId:       &NodeIdProto{Host: proto.String(n.NodeHost), Port: proto.Int32(n.NodePort)},
		AppSubmitter: proto.String(n.AppSubmitter),
		KeyId:        proto.Int32(n.KeyID),
	})
}

// ParseContainerIdentifier decodes the identifier of a ContainerToken into
// the generated message (fields this package does not model are kept as
// unknown fields).
func ParseContainerIdentifier(b []byte) (*ContainerTokenIdentifierProto, error) {
	var p ContainerTokenIdentifierProto
	if err := unmarshal(b, &p); err != nil {
		return nil, err
	}
	return &p, nil
}
