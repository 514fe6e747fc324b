// Package yarn talks to Apache Hadoop YARN natively, over Hadoop's
// protobuf RPC (IPC version 9), without a JVM.
//
// # The flow of a YARN application
//
//  1. The client connects to the ResourceManager's client port
//     (yarn.resourcemanager.address, ApplicationClientProtocol) with SIMPLE
//     authentication: NewRMClient.
//  2. It asks for an application id and the largest container the
//     scheduler grants: RMClient.NewApplication.
//  3. It submits the application (RMClient.Submit): a name, type, queue,
//     the ApplicationMaster's (AM's) container size, and its launch context
//     (command, environment, local resources the NodeManager downloads, and
//     optionally a Credentials blob). The state goes NEW → SUBMITTED →
//     ACCEPTED as the scheduler allocates the AM container and a
//     NodeManager launches it.
//  4. The AM runs inside that container. It finds its AMRMToken in the
//     file $HADOOP_TOKEN_FILE_LOCATION names, and connects to the
//     ResourceManager's scheduler port (yarn.resourcemanager.scheduler.address,
//     ApplicationMasterProtocol); that port accepts only TOKEN (SASL
//     DIGEST-MD5) authentication, even on an insecure cluster. Once the AM
//     registers, the application is RUNNING.
//  5. The AM asks for containers with allocate calls (also its heartbeat),
//     receives them with an NMToken per NodeManager, and starts each one by
//     calling that NodeManager's ContainerManagementProtocol, again with
//     TOKEN authentication, this time using the NMToken.
//  6. The AM unregisters with a final status. The application ends
//     FINISHED, FAILED (the AM failed more often than its attempts allow)
//     or KILLED (RMClient.Kill). The client learns this by polling
//     RMClient.ApplicationReport.
//
// This package implements the client side (steps 1–3 and 6). The wire
// protocol, including TOKEN authentication, is in internal/hrpc.
//
// # Usage
//
//	hc, _ := conf.LoadHadoopConf(os.LookupEnv)
//	user, _ := hc.User(os.LookupEnv)
//	rm, err := yarn.NewRMClient(ctx, hc, user)
//	...
//	defer rm.Close()
//	app, err := rm.NewApplication(ctx)
//	err = rm.Submit(ctx, yarn.Submission{ID: app.ID, Name: "job", Type: "SPINDLE",
//		Command: []string{"./am"}, Resource: yarn.Resource{MemoryMB: 512, VCores: 1}, MaxAttempts: 1})
//	report, err := rm.ApplicationReport(ctx, app.ID)
//
// Errors the ResourceManager reports are *RemoteError values; errors.Is
// maps ApplicationNotFoundException onto ErrApplicationNotFound.
package yarn
