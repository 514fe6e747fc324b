// Package yarnclient is ps-submit's YARN side: the client that stages and
// submits a job as a YARN application and follows it, the commands on an
// application (Application, Kill), and the ApplicationMaster's entry point
// (AMMain), which YARN runs as "ps-submit am job.json".
//
// Submit checks on the client what the ApplicationMaster would refuse
// (job.Check), stages ps-submit itself, the command's executable, its
// files and the shared libraries both need under
// /user/<user>/.spindle/<application id>/ in HDFS with job.json, submits
// the application and polls its report until it ends, showing the job's
// status asked of the AM's tracker. When ctx ends it kills the
// application. AMMain reads job.json, connects to the ResourceManager's
// scheduler with the attempt's token and runs the job with yarnam.Run.
//
// Plan is Submit's dry run: the application, the ApplicationMaster's
// container, the files that would be staged (stagePlan, shared with
// Submit; archives are staged under archives/ and localized as ARCHIVE)
// and every task's container, without contacting the cluster.
//
// Every entry point finds the Hadoop configuration and user with
// conf.LoadHadoop. On a Kerberos-secured cluster (hadoop.security.
// authentication=kerberos) each logs in first (Options.Login, else the
// ticket cache) and acts as the principal's short name; Submit ships
// HDFS and ResourceManager delegation tokens in the application's
// credentials, which the ApplicationMaster passes on to every task.
package yarnclient
