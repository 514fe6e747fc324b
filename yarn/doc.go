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
// RMClient implements the client side (steps 1–3 and 6); AMClient
// (steps 4–6: Register, Allocate, Finish) and NMClient (starting,
// stopping and inspecting containers) the ApplicationMaster side. The
// wire protocol, including TOKEN authentication, is in internal/hrpc.
//
// # Usage
//
//	h, err := conf.LoadHadoop(os.LookupEnv) // configuration and user
//	rm, err := yarn.NewRMClient(ctx, h.Conf, yarn.Identity{User: h.User}) // with Kerberos: Identity.Kerberos
//	...
//	defer rm.Close()
//	app, err := rm.NewApplication(ctx)
//	err = rm.Submit(ctx, yarn.Submission{ID: app.ID, Name: "job", Type: "SPINDLE",
//		Command: []string{"./am"}, Resource: yarn.Resource{MemoryMB: 512, VCores: 1}, MaxAttempts: 1})
//	report, err := rm.ApplicationReport(ctx, app.ID)
//
// Inside the AM container:
//
//	am, err := yarn.NewAMClient(ctx, hc, "") // the token file $HADOOP_TOKEN_FILE_LOCATION names
//	defer am.Close()
//	_, err = am.Register(ctx, host, -1, "")
//	nm := yarn.NewNMClient(am)
//	defer nm.Close()
//	resp, err := am.Allocate(ctx, yarn.AllocateRequest{Asks: []yarn.Ask{{Priority: 1, Count: 2,
//		Resource: yarn.Resource{MemoryMB: 128, VCores: 1}}}})
//	// later heartbeats: am.Allocate(ctx, yarn.AllocateRequest{Progress: p})
//	for _, c := range resp.Allocated {
//		err = nm.StartContainer(ctx, c, yarn.LaunchContext{Commands: []string{"./worker"}})
//	}
//	// ... collect resp.Completed from heartbeats, then:
//	err = am.Finish(ctx, yarn.FinalSucceeded, "", "")
//
// The AM is not told the scheduler address: it reads it from the Hadoop
// configuration (yarn.resourcemanager.scheduler.address), so the client
// should pass HADOOP_CONF_DIR (or the configuration) in the AM's
// environment.
//
// Errors the ResourceManager reports are *RemoteError values; errors.Is
// maps ApplicationNotFoundException onto ErrApplicationNotFound.
package yarn
