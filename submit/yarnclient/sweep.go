package yarnclient

import (
	"cmp"
	"context"
	"path"
	"slices"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/spindle-ps/spindle/io/dfs"
	"github.com/spindle-ps/spindle/job"
	"github.com/spindle-ps/spindle/yarn"
)

// Staging directories left behind. The ApplicationMaster removes its
// application's staging directory when the application ends, and Submit
// and Kill remove it when they see the end themselves. Two ends leave it:
// an application killed from outside ("yarn application -kill", a queue's
// administrator) while its ApplicationMaster had attempts left, since the
// AM, stopped by a signal, keeps the files for the next attempt a
// NodeManager's shutdown would bring; and the last attempt of an AM that
// died. So every submission sweeps the user's staging directories: one
// whose application the ResourceManager reports ended is removed. An
// application the ResourceManager does not know keeps its directory: it
// may be another cluster's, or one a ps-submit is submitting right now.
const (
	// sweepMax bounds the applications a submission asks about, the
	// newest first.
	sweepMax = 64
	// sweepTimeout bounds the whole sweep.
	sweepTimeout = 10 * time.Second
)

// sweepStaging removes the staging directories under root, the parent of
// every application's, whose application's report says it ended; not that of
// app, the application being submitted. Nothing it meets is an error of
// the submission: it logs what it removed and what it could not, naming
// each application by its id alone, since "application <id>" is how
// ps-submit names the application it submits, which scripts look for.
func sweepStaging(ctx context.Context, fsys dfs.FileSystem, root string, app yarn.ApplicationID, report func(context.Context, yarn.ApplicationID) (yarn.ApplicationReport, error), r job.Resolver, log *logrus.Entry) {
	ctx, cancel := context.WithTimeout(ctx, sweepTimeout)
	defer cancel()
	infos, err := fsys.ReadDir(ctx, root)
	if err != nil {
		log.WithError(err).Debug("staging directories not swept")
		return
	}
	var ids []yarn.ApplicationID
	for _, fi := range infos {
		if id, err := yarn.ParseApplicationID(fi.Name()); err == nil && fi.IsDir() && id != app && id.String() == fi.Name() {
			ids = append(ids, id)
		}
	}
	slices.SortFunc(ids, func(a, b yarn.ApplicationID) int {
		return cmp.Or(cmp.Compare(b.ClusterTimestamp, a.ClusterTimestamp), cmp.Compare(b.ID, a.ID))
	})
	for _, id := range ids[:min(len(ids), sweepMax)] {
		rep, err := report(ctx, id)
		if err != nil {
			log.WithError(err).WithField("staging_of", id.String()).Debug("staging directory kept: no report of its application")
			continue
		}
		if !rep.State.Terminal() {
			continue
		}
		dir := path.Join(root, id.String())
		if !succeeded(rep) {
			readJobDirs(ctx, fsys, dir).drop(ctx, r, id.String(), log)
		}
		if err := fsys.RemoveAll(ctx, dir); err != nil {
			log.WithError(err).Warnf("could not remove the staging directory of %s, which ended %v", id, rep.State)
			continue
		}
		log.Infof("removed the staging directory of %s, which ended %v", id, rep.State)
	}
}
