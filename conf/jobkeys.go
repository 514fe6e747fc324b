package conf

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	crand "crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"os"
	"time"
)

// JobKeysFile is the name of the keys file in a YARN container's working
// directory.
const JobKeysFile = "spindle-job.keys"

// TrackerServerName is the name in the tracker's certificate, which clients
// verify whatever host they dial.
const TrackerServerName = "spindle-tracker"

// maxJobKeysFile bounds the size of a keys file.
const maxJobKeysFile = 64 << 10

// JobKeys are a job's keys, which its launcher makes and hands to every
// task in a file readable only by the task's user (mode 0600), never in
// the environment (PS.JobKeys, SPINDLE_JOB_KEYS): the job secret, from
// which the nodes derive their ZeroMQ CURVE keys and with which they
// register and call the tracker, and the tracker's TLS certificate
// (self-signed ECDSA P-256, made for the job) and private key. Clients of
// the tracker trust that certificate only.
//
// The file is JSON: {"secret": "…", "cert": "<PEM>", "key": "<PEM>"}. A
// task's copy lacks the key, which only the tracker needs.
type JobKeys struct {
	Secret  string `json:"secret"`
	CertPEM string `json:"cert"`
	KeyPEM  string `json:"key,omitempty"`
}

// NewJobKeys returns new keys: secret, when empty, is a new random one; the
// certificate is new, valid for TrackerServerName from an hour ago for validity.
func NewJobKeys(secret string, validity time.Duration) (*JobKeys, error) {
	if secret == "" {
		var b [24]byte
		if _, err := crand.Read(b[:]); err != nil {
			return nil, fmt.Errorf("conf: keys: secret: %w", err)
		}
		secret = hex.EncodeToString(b[:])
	}
	priv, err := ecdsa.GenerateKey(elliptic.P256(), crand.Reader)
	if err != nil {
		return nil, fmt.Errorf("conf: keys: key: %w", err)
	}
	serial, err := crand.Int(crand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	if err != nil {
		return nil, fmt.Errorf("conf: keys: serial: %w", err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: TrackerServerName},
		DNSNames:              []string{TrackerServerName},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(validity),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(crand.Reader, tmpl, tmpl, &priv.PublicKey, priv)
	if err != nil {
		return nil, fmt.Errorf("conf: keys: certificate: %w", err)
	}
	kder, err := x509.MarshalECPrivateKey(priv)
	if err != nil {
		return nil, fmt.Errorf("conf: keys: key: %w", err)
	}
	return &JobKeys{
		Secret:  secret,
		CertPEM: string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})),
		KeyPEM:  string(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})),
	}, nil
}

// ForTasks returns the keys without the tracker's private key.
func (k *JobKeys) ForTasks() *JobKeys { return &JobKeys{Secret: k.Secret, CertPEM: k.CertPEM} }

// Marshal returns the file's content.
func (k *JobKeys) Marshal() ([]byte, error) { return json.MarshalIndent(k, "", "  ") }

// ParseJobKeys reads a keys file's content; name names it in errors.
func ParseJobKeys(name string, b []byte) (*JobKeys, error) {
	var k JobKeys
	if err := json.Unmarshal(b, &k); err != nil {
		return nil, fmt.Errorf("conf: keys: %s: %w", name, err)
	}
	if k.Secret == "" {
		return nil, fmt.Errorf("conf: keys: %s: no secret", name)
	}
	if _, err := k.ClientTLS(); err != nil {
		return nil, fmt.Errorf("conf: keys: %s: %w", name, err)
	}
	return &k, nil
}

// WriteJobKeys writes k to a new file at path, mode 0600. It refuses to
// replace a file.
func WriteJobKeys(path string, k *JobKeys) error {
	b, err := k.Marshal()
	if err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("conf: keys: %w", err)
	}
	_, werr := f.Write(b)
	if err := errors.Join(werr, f.Close()); err != nil {
		_ = os.Remove(path)
		return fmt.Errorf("conf: keys: write %s: %w", path, err)
	}
	return nil
}

// ReadJobKeys reads the keys file at path. A file that others than its
// owner may read is refused: the keys would not be the job's alone.
func ReadJobKeys(path string) (*JobKeys, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("conf: keys: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("conf: keys: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("conf: keys: %s is not a regular file", path)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("conf: keys: %s has mode %v: others may read it (want 0600)", path, fi.Mode().Perm())
	}
	b, err := io.ReadAll(io.LimitReader(f, maxJobKeysFile+1))
	if err != nil {
		return nil, fmt.Errorf("conf: keys: read %s: %w", path, err)
	}
	if len(b) > maxJobKeysFile {
		return nil, fmt.Errorf("conf: keys: %s is larger than %d bytes", path, maxJobKeysFile)
	}
	return ParseJobKeys(path, b)
}

// ServerTLS is the tracker's TLS configuration: its certificate and key.
func (k *JobKeys) ServerTLS() (*tls.Config, error) {
	cert, err := tls.X509KeyPair([]byte(k.CertPEM), []byte(k.KeyPEM))
	if err != nil {
		return nil, fmt.Errorf("conf: keys: the tracker's certificate: %w", err)
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS13}, nil
}

// ClientTLS is the TLS configuration of the tracker's clients: they trust
// the job's certificate and nothing else.
func (k *JobKeys) ClientTLS() (*tls.Config, error) { return TrackerClientTLS([]byte(k.CertPEM)) }

// TrackerClientTLS is the TLS configuration of a client that trusts the
// certificate certPEM and nothing else.
func TrackerClientTLS(certPEM []byte) (*tls.Config, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(certPEM) {
		return nil, errors.New("no PEM certificate for the tracker")
	}
	return &tls.Config{RootCAs: pool, ServerName: TrackerServerName, MinVersion: tls.VersionTLS13}, nil
}
