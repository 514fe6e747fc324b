package yarnclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/spindle-ps/spindle/conf"
	"github.com/spindle-ps/spindle/internal/hadoop/creds"
	"github.com/spindle-ps/spindle/io/dfs"
	"github.com/spindle-ps/spindle/io/model"
	"github.com/spindle-ps/spindle/job"
	"github.com/spindle-ps/spindle/job/webauth"
	"github.com/spindle-ps/spindle/job/yarnam"
	"github.com/spindle-ps/spindle/tracker"
	"github.com/spindle-ps/spindle/yarn"
)

// Options are the dependencies of Submit.
type Options struct {
	// Lookup reads the environment: the Hadoop configuration is found
	// with it the Hadoop way, and the user is HADOOP_USER_NAME or the
	// login (with Kerberos, the principal's short name). nil means none
	// (the login user, no configuration).
	Lookup conf.Lookup
	// Executable is the ps-submit binary that runs as the
	// ApplicationMaster ("ps-submit am job.json"); "" means
	// os.Executable().
	Executable string
	// AMMemoryMB and AMCores size the ApplicationMaster's container;
	// 0 means 512 MB and 1 vcore.
	AMMemoryMB, AMCores int
	// AMMaxAttempts is how many times YARN may start the
	// ApplicationMaster; 0 means 1. A later attempt starts every task
	// again, from the job's newest usable checkpoint when it has one.
	AMMaxAttempts int
	// Priority is the application's YARN priority; Tags are its YARN
	// application tags.
	Priority int
	Tags     []string
	// AllocationTimeout is how long a task may wait for a container
	// before the job fails (yarnam.Run's AllocationTimeout, passed in
	// job.json); 0 means 10 minutes.
	AllocationTimeout time.Duration
	// Log receives the client's own messages; nil discards them.
	Log *logrus.Entry
	// OnReport, when set, is called with the first application report and
	// with every report whose state, final status, tracking URL or attempt
	// differs from the previous one.
	OnReport func(yarn.ApplicationReport)
	// Poll is the interval of the application reports; 0 means 500 ms.
	Poll time.Duration
	// KillTimeout bounds how long Submit waits for a killed
	// application to end; 0 means 30 s.
	KillTimeout time.Duration
	// OnSubmitted, when set, is called with the application's id once
	// the ResourceManager accepted it.
	OnSubmitted func(yarn.ApplicationID)
	// OnStatus, when set, is called with the job's status while the
	// application runs, as the ApplicationMaster's tracker reports it
	// (asked at every Poll; failures are ignored).
	OnStatus func(tracker.Status)
	// Detach makes Submit return as soon as the application is
	// submitted (after one report, passed to OnReport), with a tracker.Running
	// result. The staging directory is then left to the
	// ApplicationMaster, which removes it when the job ends.
	Detach bool
	// Login is how Submit logs in to a Kerberos-secured cluster; the zero
	// value uses the ticket cache.
	Login Login
}

// statusTimeout bounds each call of the AM's tracker for the job's status.
const statusTimeout = time.Second

// Names in the staging directory and in the containers' working
// directories.
const (
	amBinaryName = "ps-submit"
	amJobFile    = "job.json"
	amLibDir     = "lib"
	// AMMode is the first argument that makes ps-submit an ApplicationMaster.
	AMMode = "am"
	// ApplicationType is the type of Spindle's YARN applications.
	ApplicationType = "SPINDLE"
)

// amConfKeys are the prefixes of the Hadoop properties the client passes
// to the ApplicationMaster in job.json, for a node whose container does
// not see the cluster's configuration: how to reach the
// ResourceManager's scheduler and HDFS. The node's own configuration,
// when there is one, wins.
var amConfKeys = []string{"yarn.resourcemanager.", "yarn.scheduler.include-port-in-node-name", "yarn.web-proxy.address", "yarn.http.policy", "fs.defaultFS", "dfs.nameservices", "dfs.ha.namenodes.",
	"dfs.namenode.rpc-address", "dfs.client.", "hadoop.security.authentication"}

// amJobConfig is job.json: what the ApplicationMaster needs to run the job.
type amJobConfig struct {
	// Spec is the job, its command rewritten to the localized executable
	// when that was shipped.
	Spec job.JobSpec `json:"spec"`
	// Resources are localized into every task container.
	Resources map[string]yarn.LocalResource `json:"resources"`
	// Hadoop holds the client's Hadoop properties the AM falls back on.
	Hadoop map[string]string `json:"hadoop,omitempty"`
	// Keys are the job's keys (the secret and the tracker's certificate
	// and key), known to the client so that it can ask for the job's
	// status. job.json lives in the staging directory, which only the
	// user may read (0700). The tasks get the secret and the certificate
	// in the keys file (conf.JobKeysFile), a private resource.
	Keys *conf.JobKeys `json:"keys,omitempty"`
	// Staging is the URI of the staging directory, which the AM removes
	// when the application ends: once it unregistered, or when its attempt
	// is the last (see maxAppAttempts).
	Staging string `json:"staging,omitempty"`
	// MaxAttempts is the number of attempts of the ApplicationMaster the
	// client asked for (--max-app-attempts); 0 means YARN's default.
	MaxAttempts int `json:"max_attempts,omitempty"`
	// AllocationTimeout is yarnam.Run's AllocationTimeout as a Go duration
	// ("10m0s"); "" means yarnam.Run's default.
	AllocationTimeout string `json:"allocation_timeout,omitempty"`
	// Principal is set when ps-submit logged in to a Kerberos-secured
	// cluster from a keytab (--principal/--keytab): it ships the keytab to
	// the AM (amKeytab, a private resource), which logs in with it as
	// Principal to obtain new delegation tokens before those the tasks
	// have reach their maximum lifetime (tokenKeeper).
	Principal string `json:"principal,omitempty"`
	// TokenFS is the URI of the file system of each HDFS delegation
	// token ps-submit obtained, by the token's service.
	TokenFS map[string]string `json:"token_fs,omitempty"`
}

// Submit runs spec as a YARN application and follows it until it
// ends. It stages the files the application needs in HDFS under
// /user/<user>/.spindle/<application id>/ — this ps-submit binary, the
// command's executable when spec.Command[0] is a path (with a slash) to a local file outside the
// system directories (/bin, /sbin, /usr, /lib, /lib64, /etc, which the
// nodes have; the tasks then run ./<its base name>), every spec.Files entry (by base name), the
// non-system shared libraries of both binaries (under lib/) and job.json —
// and submits an ApplicationMaster that runs "ps-submit am job.json"
// (AMMain, which runs yarnam.Run). It polls the application's report, passing
// changes to OnReport, until the application is FINISHED, FAILED or
// KILLED. The result is tracker.Succeeded only when YARN's final status is
// SUCCEEDED; otherwise the error carries YARN's diagnostics.
//
// When ctx ends first, the job is asked to end KILLED, as "ps-submit
// kill" does (Kill), else the application is killed, and Submit waits
// (bounded by KillTimeout) until YARN reports it ended, and returns a
// tracker.Killed result. The staging directory is removed in every case (by the
// ApplicationMaster too, when the job ends).
//
// A ResourceManager that stops answering (a restart, a failover) is asked
// again as YARN's client would (yarn.resourcemanager.connect.* settings).
// If it has not answered when those give up, Submit returns a
// tracker.Running result with an error that says so; the application may
// still run, and its staging directory is left to its ApplicationMaster.
//
// With Detach, Submit returns once the application is submitted and
// the ApplicationMaster alone removes the staging directory (Kill
// removes it after a kill).
//
// Once the application is submitted, Submit removes the staging
// directories that the user's ended applications left behind
// (sweepStaging).
func Submit(ctx context.Context, spec job.JobSpec, opts Options) (res job.Result, err error) {
	start := time.Now()
	res = job.Result{State: tracker.Failed}
	defer func() { res.Wall = time.Since(start) }()
	if err := validate(spec); err != nil {
		return res, err
	}
	if opts.Log == nil {
		l := logrus.New()
		l.Out = io.Discard
		opts.Log = logrus.NewEntry(l)
	}
	opts = withDefaults(opts)
	lookup := opts.Lookup
	if lookup == nil {
		lookup = func(string) (string, bool) { return "", false }
	}
	if opts.Executable == "" {
		if opts.Executable, err = os.Executable(); err != nil {
			return res, fmt.Errorf("yarnclient: find the ps-submit binary to ship: %w", err)
		}
	}
	hcl, err := newHadoopClient(lookup, opts.Login)
	if err != nil {
		return res, err
	}
	hc, user := hcl.hc, hcl.user
	resolver := hcl.resolver()
	defer resolver.Close()
	// What the ApplicationMaster would refuse is refused now, before an
	// application exists.
	if err := job.Check(ctx, spec, resolver, tracker.InputPlanner(resolver)); err != nil {
		return res, err
	}
	dirs := newJobDirs(ctx, resolver, spec)

	retry, err := rmRetryOf(hc)
	if err != nil {
		return res, err
	}
	rm, err := hcl.rm(ctx)
	if err != nil {
		return res, err
	}
	rmc := &rmConn{c: rm, dial: hcl.rm}
	defer rmc.Close()
	tokens, tokenFS, err := hcl.tokens(ctx, rm, resolver, append([]string{spec.Output, spec.CheckpointDir}, spec.Inputs...))
	if err != nil {
		return res, err
	}
	app, err := rm.NewApplication(ctx)
	if err != nil {
		return res, fmt.Errorf("yarnclient: new application: %w", err)
	}
	if err := checkFits(spec, opts, app.MaxResource); err != nil {
		return res, err
	}
	log := opts.Log.WithField("application", app.ID.String())

	fsys, dir, err := resolver.Resolve(ctx, stagingURI(user, app.ID))
	if err != nil {
		return res, fmt.Errorf("yarnclient: staging directory: %w", err)
	}
	detached := false
	defer func() {
		if detached {
			return // the AM's now
		}
		// Removed whatever happened, even after ctx ended.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if rerr := fsys.RemoveAll(rctx, dir); rerr != nil {
			log.WithError(rerr).Warn("could not remove the staging directory")
			err = errors.Join(err, fmt.Errorf("yarnclient: remove the staging directory: %w", rerr))
		}
	}()
	keys, err := conf.NewJobKeys("", keysValidity)
	if err != nil {
		return res, err
	}
	var kl amKerberos
	if hcl.secure() && opts.Login.Keytab != "" {
		kl = amKerberos{Principal: opts.Login.Principal, Keytab: opts.Login.Keytab, TokenFS: tokenFS}
	}
	amRes, err := stage(ctx, fsys, dir, spec, opts.Executable, lookup, hc, keys, opts, kl)
	if err != nil {
		return res, err
	}
	if err := dirs.write(ctx, fsys, dir); err != nil {
		return res, fmt.Errorf("yarnclient: staging directory: %w", err)
	}
	log.WithField("staging", fsys.URI(dir)).Debug("files staged")

	err = rm.Submit(ctx, yarn.Submission{
		ID:             app.ID,
		Name:           appName(spec),
		Type:           ApplicationType,
		Queue:          spec.Queue,
		Command:        amCommand(),
		Env:            amEnv(user),
		LocalResources: amRes,
		Resource:       yarn.Resource{MemoryMB: int64(opts.AMMemoryMB), VCores: int32(opts.AMCores)},
		MaxAttempts:    int32(opts.AMMaxAttempts),
		Priority:       int32(opts.Priority),
		Tags:           opts.Tags,
		Tokens:         tokens,
	})
	if err != nil {
		return res, fmt.Errorf("yarnclient: submit the application: %w", err)
	}
	log.Info("application submitted")
	if opts.OnSubmitted != nil {
		opts.OnSubmitted(app.ID)
	}
	sweepStaging(ctx, fsys, path.Dir(dir), app.ID, rm.ApplicationReport, resolver, log)
	if opts.Detach {
		detached = true
		res.State = tracker.Running
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		if r, err := rm.ApplicationReport(rctx, app.ID); err == nil && opts.OnReport != nil {
			opts.OnReport(r)
		}
		return res, nil
	}

	r, err := follow(ctx, rmc, retry, app.ID, opts, keys)
	res.Status.Diagnostics = r.Diagnostics
	if r.State.Terminal() && !succeeded(r) {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		dirs.drop(dctx, resolver, app.ID.String(), log)
		cancel()
	}
	var lost *lostRMError
	switch {
	case errors.As(err, &lost):
		// Last seen running, the application may still run and need its
		// files: the ApplicationMaster removes them when it ends.
		detached = true
		res.State = tracker.Running
		return res, err
	case err != nil && ctx.Err() != nil:
		res.State = tracker.Killed
		return res, err
	case err != nil:
		return res, err
	case r.State == yarn.AppKilled || r.FinalStatus == yarn.FinalKilled:
		res.State = tracker.Killed
		return res, fmt.Errorf("yarnclient: application %s was killed: %s", app.ID, r.Diagnostics)
	case succeeded(r):
		res.State = tracker.Succeeded
		res.Output = spec.Output
		if spec.Output != "" {
			// The model's manifest holds the tracker's account of the
			// training, for the summary.
			m, err := model.ReadManifest(ctx, resolver, spec.Output)
			if err != nil {
				return res, fmt.Errorf("yarnclient: application %s succeeded, but its model is not readable: %w", app.ID, err)
			}
			if tr := m.Training; tr != nil {
				res.Status.EpochRecords, res.Status.Metrics, res.Status.MetricsEpoch = tr.EpochRecords, tr.Metrics, tr.MetricsEpoch
				res.Status.LocatedGiven, res.Status.LocalGiven = tr.LocatedShards, tr.NodeLocalShards
				res.ResumedFrom, res.Restarts = tr.ResumedFrom, tr.Restarts
			}
		}
		return res, nil
	}
	return res, fmt.Errorf("yarnclient: application %s ended %v with final status %v: %s%s", app.ID, r.State, r.FinalStatus, r.Diagnostics, notFoundHint(spec.Command, r.Diagnostics))
}

// notFoundHint explains a task that its shell could not find (exit status
// 127) when the command is a bare name that names a program on this
// machine: the nodes look it up in their own PATH, and ps-submit ships
// only a command given by its path.
func notFoundHint(command []string, diagnostics string) string {
	if len(command) == 0 || strings.Contains(command[0], "/") || !strings.Contains(diagnostics, "exit status 127") {
		return ""
	}
	local, err := exec.LookPath(command[0])
	if err != nil || isSystemPath(local) {
		return ""
	}
	return fmt.Sprintf("\n(%s: a command named without a slash is looked up in the PATH of the nodes, which did not find it; "+
		"to ship this machine's %s with the job, give its path: -- %s)", command[0], local, local)
}

// succeeded reports whether r is the report of an application that
// ended and succeeded.
func succeeded(r yarn.ApplicationReport) bool {
	return r.State == yarn.AppFinished && r.FinalStatus == yarn.FinalSucceeded
}

// reportTimeout bounds one application report, so that a
// ResourceManager that accepts a call but never answers it is retried
// like one that refuses it.
const reportTimeout = 30 * time.Second

// rmRetry is how follow goes on after a call to the ResourceManager
// fails (a restart, a failover, a broken connection), as YARN's own
// client does: it dials again every interval for up to maxWait.
type rmRetry struct{ interval, maxWait time.Duration }

// rmRetryOf reads rmRetry from YARN's client settings,
// yarn.resourcemanager.connect.retry-interval.ms (30 s unless set) and
// yarn.resourcemanager.connect.max-wait.ms (15 minutes).
func rmRetryOf(hc conf.HadoopConf) (rmRetry, error) {
	var r rmRetry
	for _, s := range []struct {
		key string
		def int64
		to  *time.Duration
	}{
		{"yarn.resourcemanager.connect.retry-interval.ms", 30_000, &r.interval},
		{"yarn.resourcemanager.connect.max-wait.ms", 900_000, &r.maxWait},
	} {
		ms, err := hc.GetInt64(s.key, s.def)
		if err == nil && ms <= 0 {
			err = fmt.Errorf("%d is not a positive number of milliseconds", ms)
		}
		if err != nil {
			return r, fmt.Errorf("yarnclient: %s: %w", s.key, err)
		}
		*s.to = time.Duration(ms) * time.Millisecond
	}
	return r, nil
}

// rmConn is the client's connection to the ResourceManager, which redial
// replaces after a call failed.
type rmConn struct {
	c    *yarn.RMClient
	dial func(context.Context) (*yarn.RMClient, error)
}

func (r *rmConn) redial(ctx context.Context) error {
	c, err := r.dial(ctx)
	if err != nil {
		return err
	}
	r.c.Close()
	r.c = c
	return nil
}

func (r *rmConn) Close() { r.c.Close() }

// report asks for id's report, bounded by reportTimeout.
func (r *rmConn) report(ctx context.Context, id yarn.ApplicationID) (yarn.ApplicationReport, error) {
	ctx, cancel := context.WithTimeout(ctx, reportTimeout)
	defer cancel()
	return r.c.ApplicationReport(ctx, id)
}

// lostRMError is follow's error when the ResourceManager did not answer
// for rmRetry.maxWait: the application's fate is unknown.
type lostRMError struct {
	addr string
	id   yarn.ApplicationID
	wait time.Duration
	err  error
}

func (e *lostRMError) Error() string {
	return fmt.Sprintf("yarnclient: the resource manager at %s has not answered for %v (yarn.resourcemanager.connect.max-wait.ms): %v; "+
		"application %s may still be running: 'ps-submit status %s' follows it, 'ps-submit kill %s' stops it",
		e.addr, e.wait, e.err, e.id, e.id, e.id)
}

func (e *lostRMError) Unwrap() error { return e.err }

// follow polls id's report until it is terminal, or kills it when ctx
// ends; it returns the last report. A ResourceManager that stops
// answering is asked again as retry says; if it has not answered by
// then, follow returns a *lostRMError.
func follow(ctx context.Context, rm *rmConn, retry rmRetry, id yarn.ApplicationID, opts Options, keys *conf.JobKeys) (yarn.ApplicationReport, error) {
	ctls, err := keys.ClientTLS()
	if err != nil {
		return yarn.ApplicationReport{}, err
	}
	tick := time.NewTicker(opts.Poll)
	defer tick.Stop()
	var tc *tracker.Client // the AM's tracker, once it is known
	var tcAddr string
	defer func() {
		if tc != nil {
			tc.Close()
		}
	}()
	status := func(r yarn.ApplicationReport) {
		if opts.OnStatus == nil || r.State != yarn.AppRunning || r.RPCPort <= 0 || r.Host == "" || r.Host == "N/A" {
			return
		}
		addr := net.JoinHostPort(r.Host, strconv.Itoa(int(r.RPCPort)))
		if tc == nil || tcAddr != addr {
			if tc != nil {
				tc.Close()
			}
			tc, tcAddr = tracker.NewClient(addr, keys.Secret, tracker.WithTLS(ctls)), addr
		}
		sctx, cancel := context.WithTimeout(ctx, statusTimeout)
		defer cancel()
		if st, err := tc.Status(sctx); err == nil {
			opts.OnStatus(st)
		}
	}
	var last yarn.ApplicationReport
	first := true
	report := func(r yarn.ApplicationReport) {
		if first || r.State != last.State || r.FinalStatus != last.FinalStatus || r.TrackingURL != last.TrackingURL ||
			r.CurrentAttempt != last.CurrentAttempt {
			if opts.OnReport != nil {
				opts.OnReport(r)
			}
			opts.Log.WithFields(logrus.Fields{"application": id.String(), "state": r.State.String(),
				"final_status": r.FinalStatus.String()}).Debug("application report")
		}
		first, last = false, r
	}
	log := opts.Log.WithField("application", id.String())
	var lostSince time.Time // when the ResourceManager stopped answering
	for {
		r, err := rm.report(ctx, id)
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			now := time.Now()
			if lostSince.IsZero() {
				lostSince = now
				log.WithError(err).Warnf("the resource manager at %s does not answer; asking again every %v for up to %v",
					rm.c.Addr(), retry.interval, retry.maxWait)
			} else if waited := now.Sub(lostSince); waited >= retry.maxWait {
				return last, &lostRMError{addr: rm.c.Addr(), id: id, wait: waited.Round(time.Second), err: err}
			}
			if !sleepCtx(ctx, retry.interval) {
				break
			}
			if err := rm.redial(ctx); err != nil {
				log.WithError(err).Debug("the resource manager: dial again")
			}
			continue
		}
		if !lostSince.IsZero() {
			log.Infof("the resource manager at %s answers again", rm.c.Addr())
			lostSince = time.Time{}
		}
		report(r)
		if r.State.Terminal() {
			return r, nil
		}
		status(r)
		select {
		case <-ctx.Done():
		case <-tick.C:
			continue
		}
		break
	}
	// Stopped: ask the job to end, else kill the application, and wait,
	// bounded, until it ends.
	kctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), opts.KillTimeout)
	defer cancel()
	stopErr := fmt.Errorf("yarnclient: job stopped: %w", context.Cause(ctx))
	// reported asks for a report, as the loop above does, and dials the
	// ResourceManager again after a failure.
	reported := func(ctx context.Context) (yarn.ApplicationReport, error) {
		r, err := rm.report(ctx, id)
		if err == nil {
			report(r)
		} else if err := rm.redial(ctx); err != nil {
			log.WithError(err).Debug("the resource manager: dial again")
		}
		return r, err
	}
	if err := askJobToEnd(kctx, last, keys, "ps-submit stopped: "+context.Cause(ctx).Error()); err == nil {
		log.Info("asked the job to end")
		wait := half(kctx)
		gctx, gcancel := context.WithTimeout(kctx, wait)
		r, ended := waitEnded(gctx, reported, last, opts.Poll)
		gcancel()
		if ended {
			return r, fmt.Errorf("%w; application %s killed", stopErr, id)
		}
		log.Warnf("the job did not end within %v of the request", wait.Round(time.Millisecond))
	} else {
		log.WithError(err).Debug("the job could not be asked to end")
	}
	log.Info("killing the application")
	_, err = rm.c.Kill(kctx, id)
	if err != nil && rm.redial(kctx) == nil {
		_, err = rm.c.Kill(kctx, id)
	}
	if err != nil {
		return last, errors.Join(stopErr, fmt.Errorf("yarnclient: kill application %s: %w", id, err))
	}
	if r, ended := waitEnded(kctx, reported, last, opts.Poll); ended {
		return r, fmt.Errorf("%w; application %s killed", stopErr, id)
	}
	return last, errors.Join(stopErr, fmt.Errorf("yarnclient: application %s not reported ended within %v of the kill", id, opts.KillTimeout))
}

// sleepCtx waits d, or until ctx ends; it reports whether d passed.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// stage uploads the application's files into dir of fsys and returns the
// AM's local resources and job.json's content.
func stage(ctx context.Context, fsys dfs.FileSystem, dir string, spec job.JobSpec, self string,
	lookup conf.Lookup, hc conf.HadoopConf, keys *conf.JobKeys, opts Options, kl amKerberos) (map[string]yarn.LocalResource, error) {
	jc := amJobConfig{Spec: spec, Resources: map[string]yarn.LocalResource{}, Hadoop: map[string]string{},
		Keys: keys, Staging: fsys.URI(dir), Principal: kl.Principal, TokenFS: kl.TokenFS, MaxAttempts: opts.AMMaxAttempts}
	if opts.AllocationTimeout > 0 {
		jc.AllocationTimeout = opts.AllocationTimeout.String()
	}
	if err := fsys.MkdirAll(ctx, dir+"/"+amLibDir, 0o700); err != nil {
		return nil, fmt.Errorf("yarnclient: staging directory: %w", err)
	}
	put := func(local, name string) (yarn.LocalResource, error) {
		if d := path.Dir(name); d != "." && d != amLibDir {
			if err := fsys.MkdirAll(ctx, dir+"/"+d, 0o700); err != nil {
				return yarn.LocalResource{}, fmt.Errorf("yarnclient: staging directory: %w", err)
			}
		}
		r, err := upload(ctx, fsys, local, dir+"/"+name)
		if err != nil {
			return r, fmt.Errorf("yarnclient: stage %s: %w", local, err)
		}
		return r, nil
	}
	items, cmd, err := stagePlan(spec, self, lookup)
	if err != nil {
		return nil, err
	}
	jc.Spec.Command = cmd
	// The tasks' keys file: private to the user on the nodes too.
	kdir, err := os.MkdirTemp("", "spindle-keys-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(kdir)
	if err := conf.WriteJobKeys(filepath.Join(kdir, conf.JobKeysFile), keys.ForTasks()); err != nil {
		return nil, err
	}
	kr, err := put(filepath.Join(kdir, conf.JobKeysFile), conf.JobKeysFile)
	if err != nil {
		return nil, err
	}
	kr.Visibility = "PRIVATE"
	jc.Resources[conf.JobKeysFile] = kr
	amRes := map[string]yarn.LocalResource{}
	if kl.Keytab != "" {
		// The AM's alone, private to the user on its node too.
		r, err := put(kl.Keytab, amKeytab)
		if err != nil {
			return nil, err
		}
		r.Visibility = "PRIVATE"
		amRes[amKeytab] = r
	}
	for _, it := range items {
		r, err := put(it.Local, it.staged())
		if err != nil {
			return nil, err
		}
		r.Archive = it.Archive
		if it.AMOnly {
			amRes[it.Name] = r
		} else {
			jc.Resources[it.Name] = r
		}
	}
	for k, v := range hc {
		for _, p := range amConfKeys {
			if strings.HasPrefix(k, p) {
				jc.Hadoop[k] = v
			}
		}
	}
	js, err := json.MarshalIndent(jc, "", "  ")
	if err != nil {
		return nil, err
	}
	tmp, err := os.CreateTemp("", "spindle-job-*.json")
	if err != nil {
		return nil, err
	}
	defer os.Remove(tmp.Name())
	_, werr := tmp.Write(js)
	if err := errors.Join(werr, tmp.Close()); err != nil {
		return nil, err
	}
	if amRes[amJobFile], err = put(tmp.Name(), amJobFile); err != nil {
		return nil, err
	}
	for k, r := range jc.Resources {
		amRes[k] = r
	}
	return amRes, nil
}

// systemDirs hold programs every node has (/bin/sh): a command there is
// run from the node's own copy, not shipped.
var systemDirs = []string{"/bin/", "/sbin/", "/usr/", "/lib/", "/lib64/", "/etc/"}

func isSystemPath(p string) bool {
	abs, err := filepath.Abs(p)
	if err != nil {
		return false
	}
	for _, d := range systemDirs {
		if strings.HasPrefix(abs, d) {
			return true
		}
	}
	return false
}

func isRegularFile(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular()
}

// upload copies the local file src to name in fsys and describes it as
// YARN needs: its size and modification time as the file system reports.
func upload(ctx context.Context, fsys dfs.FileSystem, src, name string) (yarn.LocalResource, error) {
	in, err := os.Open(src)
	if err != nil {
		return yarn.LocalResource{}, err
	}
	defer in.Close()
	w, err := fsys.Create(ctx, name, dfs.CreateOptions{Overwrite: true})
	if err != nil {
		return yarn.LocalResource{}, err
	}
	_, cerr := io.Copy(w, in)
	if err := errors.Join(cerr, w.Close()); err != nil {
		return yarn.LocalResource{}, err
	}
	fi, err := fsys.Stat(ctx, name)
	if err != nil {
		return yarn.LocalResource{}, err
	}
	return yarn.LocalResource{URL: fsys.URI(name), Size: fi.Size(), Timestamp: fi.ModTime().UnixMilli(), Visibility: "APPLICATION"}, nil
}

// AMMain is ps-submit's ApplicationMaster mode, "ps-submit am job.json",
// run by YARN in the AM container that Submit asked for. It reads the
// job from job.json, connects to the ResourceManager's scheduler with the
// attempt's token ($HADOOP_TOKEN_FILE_LOCATION) and runs it with yarnam.Run,
// the tasks getting the staged executable, files and libraries. The
// Hadoop configuration is found the Hadoop way, properties it lacks taken
// from the client's (job.json); the AM's host is $NM_HOST. It logs to
// stderr and returns the exit status: 0 when the job succeeded.
func AMMain(ctx context.Context, args []string, stderr io.Writer, lookup conf.Lookup) int {
	logger := logrus.New()
	logger.Out = stderr
	log := logrus.NewEntry(logger)
	if err := runAMMain(ctx, args, log, lookup); err != nil {
		log.WithError(err).Error("application master failed")
		return 1
	}
	return 0
}

func runAMMain(ctx context.Context, args []string, log *logrus.Entry, lookup conf.Lookup) error {
	if len(args) != 1 {
		return fmt.Errorf("usage: %s %s JOB.JSON", amBinaryName, AMMode)
	}
	b, err := os.ReadFile(args[0])
	if err != nil {
		return err
	}
	var jc amJobConfig
	if err := json.Unmarshal(b, &jc); err != nil {
		return fmt.Errorf("%s: %w", args[0], err)
	}
	var allocTimeout time.Duration
	if jc.AllocationTimeout != "" {
		if allocTimeout, err = time.ParseDuration(jc.AllocationTimeout); err != nil {
			return fmt.Errorf("%s: allocation_timeout: %w", args[0], err)
		}
	}
	if lookup == nil {
		lookup = func(string) (string, bool) { return "", false }
	}
	h, err := conf.LoadHadoop(lookup)
	if err != nil {
		return err
	}
	hc, user := h.Conf, h.User
	if hc == nil {
		hc = conf.HadoopConf{}
	}
	for k, v := range jc.Hadoop {
		if _, ok := hc[k]; !ok {
			hc[k] = v
		}
	}
	h.Security = conf.LoadHadoopSecurity(hc, lookup)
	if lvl, err := logrus.ParseLevel(jc.Spec.LogLevel); err == nil && jc.Spec.LogLevel != "" {
		log.Logger.SetLevel(lvl)
	}
	log = log.WithField("job", jc.Spec.Name)
	var cred dfs.Credentials
	var start *creds.Credentials
	if h.Security.Kerberos {
		if start, err = taskTokens(h.Security.TokenFile); err != nil {
			return fmt.Errorf("delegation tokens for the tasks: %w", err)
		}
		if jc.Principal != "" {
			// Logged in from the keytab ps-submit shipped, the AM
			// reaches HDFS itself and obtains the tasks' next tokens.
			h.Security.Principal, h.Security.Keytab = jc.Principal, amKeytab
		}
		// Without, it has no Kerberos credentials: the client's
		// delegation tokens reach HDFS, and go on to the tasks.
		if cred, err = dfs.LoadCredentials(h.Security); err != nil {
			return err
		}
	}
	resolver := dfs.NewSecureResolver(hc, user, cred)
	defer resolver.Close()
	tokens, stopKeeper, err := amTokens(log, resolver, jc, start)
	if err != nil {
		return err
	}
	defer stopKeeper()
	am, err := yarn.NewAMClient(ctx, hc, "")
	if err != nil {
		return err
	}
	defer am.Close()
	host, _ := lookup("NM_HOST")
	if host == "" {
		host, _ = os.Hostname()
	}
	attempt, maxAttempts := amAttemptNumber(am.Attempt()), maxAppAttempts(jc.MaxAttempts, hc)
	more := attempt > 0 && attempt < maxAttempts
	log.WithFields(logrus.Fields{"attempt": attempt, "max_attempts": maxAttempts}).Info("application master started")
	logDir := ""
	if app, ok := applicationOfAttempt(am.Attempt()); ok {
		logDir = LogsURI(user, app)
	}
	res, err := yarnam.Run(ctx, jc.Spec, yarnam.Options{
		LogDir:            logDir,
		User:              user,
		AM:                am,
		Log:               log,
		Host:              host,
		Resources:         jc.Resources,
		Env:               taskEnv(),
		Planner:           tracker.WithLocations(tracker.InputPlanner(resolver), resolver.Locator().Blocks),
		Resolver:          resolver,
		Rerun:             attempt > 1,
		MoreAttempts:      more,
		Keys:              jc.Keys,
		WebProxy:          amWebProxy(hc, lookup, am.Attempt()),
		KeysFile:          keysFileFor(jc),
		Tokens:            tokens,
		AllocationTimeout: allocTimeout,
		NodeNamesWithPort: strings.EqualFold(strings.TrimSpace(hc.GetDefault("yarn.scheduler.include-port-in-node-name", "false")), "true"),
	})
	stopKeeper()
	log.WithFields(logrus.Fields{"state": res.State, "tasks": fmt.Sprintf("%+v", res.Tasks)}).Info("job ended")
	if more && errors.Is(err, yarnam.ErrNotUnregistered) {
		// The next attempt starts from the staged files.
		log.Info("the staging directory stays for the next attempt")
	} else if jc.Staging != "" {
		// The job is over: nothing needs the staged files any more, and a
		// detached client is not there to remove them.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if fsys, dir, rerr := resolver.Resolve(rctx, jc.Staging); rerr != nil {
			log.WithError(rerr).Warn("could not remove the staging directory")
		} else if rerr := fsys.RemoveAll(rctx, dir); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
			log.WithError(rerr).Warn("could not remove the staging directory")
		}
	}
	return err
}

// amWebProxy is where the status page is served from: the
// ResourceManager's web proxy as YARN names it to an AM's filter (see
// webauth.ProxyHosts), under the base path the RM gives the AM
// ($APPLICATION_WEB_PROXY_BASE, else /proxy/<application id>).
func amWebProxy(hc conf.HadoopConf, lookup conf.Lookup, attempt string) *webauth.ProxyOptions {
	base, _ := lookup("APPLICATION_WEB_PROXY_BASE")
	if base == "" {
		if app := appOfAttempt(attempt); app != "" {
			base = "/proxy/" + app
		}
	}
	return &webauth.ProxyOptions{Hosts: webauth.ProxyHosts(hc), URIBase: base}
}

// appOfAttempt is the application id of an attempt id
// ("appattempt_<cluster>_<app>_<attempt>" → "application_<cluster>_<app>");
// "" when it is not one.
func appOfAttempt(id string) string {
	rest, ok := strings.CutPrefix(id, "appattempt_")
	i := strings.LastIndexByte(rest, '_')
	if !ok || i <= 0 {
		return ""
	}
	return "application_" + rest[:i]
}

// keysValidity is how long a job's tracker certificate is valid.
const keysValidity = 366 * 24 * time.Hour

// keysFileFor is the keys file's path in a task container: the shipped
// resource, or "" (yarnam's default) for a job.json without one.
func keysFileFor(jc amJobConfig) string {
	if _, ok := jc.Resources[conf.JobKeysFile]; ok {
		return conf.JobKeysFile
	}
	return ""
}

// amAttemptNumber is the number of an application attempt id
// ("appattempt_<cluster>_<app>_<attempt>"); 0 when it is not one.
func amAttemptNumber(id string) int {
	i := strings.LastIndexByte(id, '_')
	if !strings.HasPrefix(id, "appattempt_") || i < 0 {
		return 0
	}
	n, err := strconv.Atoi(id[i+1:])
	if err != nil {
		return 0
	}
	return n
}

// maxAppAttempts is how many attempts of the ApplicationMaster the
// ResourceManager allows an application that asked for requested (0:
// none asked), by its rule: yarn.resourcemanager.am.max-attempts (default
// 2) when none was asked, the request when it does not exceed
// yarn.resourcemanager.am.global.max-attempts (default the former),
// else that global bound. hc is the AM's view of the cluster's
// configuration: a ResourceManager set otherwise makes this a guess.
func maxAppAttempts(requested int, hc conf.HadoopConf) int {
	num := func(key string, def int) int {
		if n, err := strconv.Atoi(strings.TrimSpace(hc.GetDefault(key, ""))); err == nil {
			return n
		}
		return def
	}
	rmMax := num("yarn.resourcemanager.am.max-attempts", 2)
	global := num("yarn.resourcemanager.am.global.max-attempts", rmMax)
	switch {
	case requested <= 0:
		return rmMax
	case requested > global:
		return global
	}
	return requested
}

// yarnClient connects to the ResourceManager with the Hadoop
// configuration found the Hadoop way through lookup.
func yarnClient(ctx context.Context, lookup conf.Lookup, login Login) (*yarn.RMClient, *hadoopClient, error) {
	hcl, err := newHadoopClient(lookup, login)
	if err != nil {
		return nil, nil, err
	}
	rm, err := hcl.rm(ctx)
	if err != nil {
		return nil, nil, err
	}
	return rm, hcl, nil
}

// Kill ends application id, and waits, polling every poll (0 means
// 500 ms) until ctx ends, for YARN to report it ended. It first asks the
// job to end KILLED through its tracker (askJobToEnd: the tasks' output
// and the job's final status are kept) and waits for that up to half of
// what remains of ctx; an application that did not end by then, or whose
// job could not be asked, is killed through the ResourceManager. It
// returns the last report and whether the application had already ended
// before the kill (then nothing was killed). Once the application has
// ended its staging directory, /user/<user>/.spindle/<id>/, is removed:
// a killed ApplicationMaster cannot remove it itself.
func Kill(ctx context.Context, id yarn.ApplicationID, lookup conf.Lookup, login Login, poll time.Duration) (r yarn.ApplicationReport, already bool, err error) {
	if poll <= 0 {
		poll = 500 * time.Millisecond
	}
	rm, hcl, err := yarnClient(ctx, lookup, login)
	if err != nil {
		return r, false, err
	}
	defer rm.Close()
	if r, err = rm.ApplicationReport(ctx, id); err != nil {
		return r, false, fmt.Errorf("yarnclient: report of application %s: %w", id, err)
	}
	already = r.State.Terminal()
	if !already {
		report := func(ctx context.Context) (yarn.ApplicationReport, error) { return rm.ApplicationReport(ctx, id) }
		ended := false
		if keys, err := stagedKeys(ctx, hcl, id); err == nil && askJobToEnd(ctx, r, keys, "ps-submit kill") == nil {
			gctx, cancel := context.WithTimeout(ctx, half(ctx))
			r, ended = waitEnded(gctx, report, r, poll)
			cancel()
		}
		if !ended {
			if _, err := rm.Kill(ctx, id); err != nil {
				return r, false, fmt.Errorf("yarnclient: kill application %s: %w", id, err)
			}
			if r, ended = waitEnded(ctx, report, r, poll); !ended {
				return r, false, fmt.Errorf("yarnclient: application %s still %v after the kill: %w", id, r.State, context.Cause(ctx))
			}
		}
	}
	resolver := hcl.resolver()
	defer resolver.Close()
	fsys, dir, err := resolver.Resolve(ctx, stagingURI(hcl.user, id))
	if err == nil {
		if !succeeded(r) {
			readJobDirs(ctx, fsys, dir).drop(ctx, resolver, id.String(), nil)
		}
		err = fsys.RemoveAll(ctx, dir)
	}
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return r, already, fmt.Errorf("yarnclient: remove the staging directory of %s: %w", id, err)
	}
	return r, already, nil
}

// LogsURI is where the ApplicationMaster of application id keeps the
// standard output and error of every container that ended, named by
// job.LogName: "ps-submit logs" reads them there once the application
// is over.
func LogsURI(user string, id yarn.ApplicationID) string {
	return "hdfs:///user/" + user + "/.spindle/logs/" + id.String()
}

// applicationOfAttempt is the application of an attempt id
// ("appattempt_<cluster>_<app>_<attempt>").
func applicationOfAttempt(attempt string) (yarn.ApplicationID, bool) {
	rest, ok := strings.CutPrefix(attempt, "appattempt_")
	i := strings.LastIndexByte(rest, '_')
	if !ok || i < 0 {
		return yarn.ApplicationID{}, false
	}
	id, err := yarn.ParseApplicationID("application_" + rest[:i])
	return id, err == nil
}

// stagingURI is where Submit stages application id's files.
func stagingURI(user string, id yarn.ApplicationID) string {
	return stagingDirName(user, id.String())
}

// stagingDirName is the staging directory of user's application id.
func stagingDirName(user, id string) string {
	return "hdfs:///user/" + user + "/.spindle/" + id
}

// withDefaults fills in the defaults of opts' zero fields.
func withDefaults(opts Options) Options {
	if opts.AMMemoryMB <= 0 {
		opts.AMMemoryMB = 512
	}
	if opts.AMCores <= 0 {
		opts.AMCores = 1
	}
	if opts.AMMaxAttempts <= 0 {
		opts.AMMaxAttempts = 1
	}
	if opts.Poll <= 0 {
		opts.Poll = 500 * time.Millisecond
	}
	if opts.KillTimeout <= 0 {
		opts.KillTimeout = 30 * time.Second
	}
	return opts
}
