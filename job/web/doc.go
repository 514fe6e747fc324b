// Package web serves a job's status page, the same for both clusters:
// the ApplicationMaster serves it at the application's tracking URL
// (reached through the ResourceManager's web proxy), and a local job at
// an address ps-submit prints.
//
// The page ("/") is static HTML and a script, embedded in the binary
// with the charting library (uPlot, MIT, under assets/vendor/uplot):
// nothing is fetched from elsewhere at run time. The script polls
// "/status.json" (Status) every two seconds, with relative URLs so that
// it works behind a proxy's path prefix, and draws the loss and AUC per
// epoch and over time, every worker's examples per second, and a table
// of the tasks (state, attempt, restarts, node, container, last exit)
// with links to each task's output ("/logs/{role}/{rank}/{stdout|stderr}",
// through Options.Logs). After each drawing it sets the body's
// data-drawn attribute, and each chart's data-series and data-points,
// which the browser tests read.
//
// With Options.Scale (a local job, whose page only its owner opens)
// "POST /scale" asks the job for other numbers of servers and workers:
// ps-submit scale posts servers=N, workers=N or both with the page's
// token.
//
// The numbers come from the job's tracker.State: epochs' metrics as the
// workers report them, the records of every worker's shards (sampled by
// Server every second into a bounded history for the speed), and the
// tasks as the job's supervisor sets them.
package web
