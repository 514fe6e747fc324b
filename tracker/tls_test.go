package tracker

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/spindle-ps/spindle/conf"
)

// TestServiceOverTLS: the job's clients call the tracker over TLS; a
// plain client, a client that trusts another job's certificate and a
// client without the secret are all refused.
func TestServiceOverTLS(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	keys, err := conf.NewJobKeys("", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	other, err := conf.NewJobKeys("", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	stls, err := keys.ServerTLS()
	if err != nil {
		t.Fatal(err)
	}
	st := NewState(shards(2), time.Now())
	svc, err := Serve(ctx, "127.0.0.1:0", st, keys.Secret, quietLog(), WithTLS(stls))
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close()

	var cfg conf.Config
	cfg.Job.TrackerAddr, cfg.Job.TrackerCert, cfg.PS.JobSecret = svc.Addr(), []byte(keys.CertPEM), keys.Secret
	c, err := ConfigClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if got, err := c.Status(ctx); err != nil || got.ShardsTotal != 2 {
		t.Fatalf("status %+v %v", got, err)
	}

	// Another job's certificate: refused at once, whatever the secret.
	cfg.Job.TrackerCert = []byte(other.CertPEM)
	wrong, err := ConfigClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer wrong.Close()
	if err := wrong.Kill(ctx, "x"); !errors.Is(err, ErrUntrusted) {
		t.Fatalf("another job's certificate: %v, want ErrUntrusted", err)
	}

	// No TLS: the call never goes through.
	pctx, pcancel := context.WithTimeout(ctx, time.Second)
	defer pcancel()
	plain := NewClient(svc.Addr(), keys.Secret)
	defer plain.Close()
	if err := plain.Kill(pctx, "x"); err == nil {
		t.Fatal("a plain call went through")
	}

	// TLS without the secret.
	cfg.Job.TrackerCert, cfg.PS.JobSecret = []byte(keys.CertPEM), "guess"
	nosecret, err := ConfigClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer nosecret.Close()
	if err := nosecret.Kill(ctx, "x"); !errors.Is(err, ErrUnauthorized) {
		t.Fatalf("wrong secret: %v, want ErrUnauthorized", err)
	}
	select {
	case r := <-st.KillRequests():
		t.Fatalf("a refused kill went through: %q", r)
	default:
	}
}
