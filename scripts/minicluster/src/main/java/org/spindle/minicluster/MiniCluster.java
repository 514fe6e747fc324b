package org.spindle.minicluster;

import java.io.File;
import java.io.IOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.StandardCopyOption;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.TimeUnit;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.permission.FsPermission;
import org.apache.hadoop.hdfs.HdfsConfiguration;
import org.apache.hadoop.hdfs.MiniDFSCluster;
import org.apache.hadoop.hdfs.server.datanode.DataNode;
import org.apache.hadoop.util.ShutdownHookManager;
import org.apache.hadoop.util.VersionInfo;
import org.apache.hadoop.yarn.api.records.NodeId;
import org.apache.hadoop.yarn.api.records.NodeState;
import org.apache.hadoop.yarn.conf.YarnConfiguration;
import org.apache.hadoop.yarn.server.MiniYARNCluster;
import org.apache.hadoop.yarn.server.nodemanager.NodeManager;
import org.apache.hadoop.yarn.server.resourcemanager.ResourceManager;
import org.apache.hadoop.yarn.server.resourcemanager.rmnode.RMNode;

/**
 * Runs a MiniDFSCluster and a MiniYARNCluster in this JVM for Spindle's
 * integration tests.
 *
 * <p>Everything lives under the state directory (system property
 * {@code spindle.minicluster.dir}): data/ holds the HDFS and YARN working
 * directories, conf/ receives core-site.xml, hdfs-site.xml and yarn-site.xml
 * once the clusters are up, and the file {@code ready} (key=value lines with
 * the addresses) is written last and means "HDFS and YARN are usable". The
 * process then runs until it gets SIGTERM, when a shutdown hook stops YARN and
 * then HDFS.
 *
 * <p>Arguments are {@code key=value} Hadoop configuration overrides, applied
 * after the built-in defaults. Sizes come from system properties set by
 * scripts/minicluster.sh (see {@link #intProp}).
 */
public final class MiniCluster {
  private static final String P = "spindle.minicluster.";

  private static volatile MiniDFSCluster dfs;
  private static volatile MiniYARNCluster yarn;
  private static volatile Kerberos kerberos;

  private MiniCluster() {
  }

  public static void main(String[] args) throws Exception {
    String dirProp = System.getProperty(P + "dir");
    if (dirProp == null) {
      System.err.println("system property " + P + "dir (the state directory) is not set");
      System.exit(2);
    }
    File stateDir = new File(dirProp).getAbsoluteFile();
    File dataDir = new File(stateDir, "data");
    File confDir = new File(stateDir, "conf");
    File readyFile = new File(stateDir, "ready");
    Files.deleteIfExists(readyFile.toPath());
    if (System.getProperty("test.build.data") == null) {
      System.setProperty("test.build.data", dataDir.getPath());
    }

    int dataNodes = intProp("datanodes", 1);
    int nodeManagers = intProp("nodemanagers", 2);

    // SIGTERM/SIGINT stop the clusters on an ordinary thread and then exit: inside a JVM shutdown
    // hook HDFS cannot stop cleanly (the DataNode removes its own shutdown hooks and fails with
    // "Shutdown in progress"). The hook remains as a fallback for other ways of exiting.
    for (String sig : new String[] {"TERM", "INT"}) {
      sun.misc.Signal.handle(new sun.misc.Signal(sig), s -> {
        Thread t = new Thread(() -> {
          log("got SIG" + s.getName() + "; shutting down");
          shutdown(readyFile);
          System.exit(0);
        }, "spindle-minicluster-stop");
        t.start();
      });
    }
    ShutdownHookManager.get().addShutdownHook(() -> shutdown(readyFile), 100, 45, TimeUnit.SECONDS);

    try {
      // Kerberos mode (start --kerberos): the KDC comes first; its time counts in startup_ms.
      long tKdc = System.nanoTime();
      if (boolProp("kerberos", false)) {
        log("starting the KDC");
        kerberos = Kerberos.start(new File(stateDir, "kdc"));
        log("KDC up at " + kerberos.kdcAddress() + ", realm " + kerberos.realm + " after " + ms(tKdc) + " ms");
      }
      Configuration conf = configure(dataDir, kerberos, args);
      long t0 = kerberos != null ? tKdc : System.nanoTime();
      if (kerberos != null) {
        kerberos.writeJvmSite(conf);
        // Every server logs in again from its keytab setting; this is the same principal.
        kerberos.login(conf);
      }

      // Node i (DataNode i and NodeManager i) stands for host i: see hostAddress.
      String[] hostNames = new String[Math.max(dataNodes, nodeManagers)];
      for (int i = 0; i < hostNames.length; i++) {
        hostNames[i] = InetAddress.getByName(hostAddress(i)).getCanonicalHostName();
      }
      log("starting HDFS (" + dataNodes + " DataNode(s)), Hadoop " + VersionInfo.getVersion());
      // DataNodes one at a time, so that each registers with its own host's name. Left to
      // itself MiniDFSCluster names every DataNode 127.0.0.1, or maps the names it is given
      // back to localhost in this JVM (which would also move NodeManager i's address).
      setDataNode(conf, 0, hostNames[0]);
      dfs = new MiniDFSCluster.Builder(conf) // which adds the NameNode's addresses to conf
          .numDataNodes(Math.min(dataNodes, 1))
          .checkDataNodeAddrConfig(true)
          .checkDataNodeHostConfig(true)
          .format(true)
          .build();
      for (int i = 1; i < dataNodes; i++) {
        Configuration dc = setDataNode(new Configuration(conf), i, hostNames[i]);
        dfs.startDataNodes(dc, 1, null, true, null, null, null, null, null, false, true, true, null, null, null);
      }
      dfs.waitClusterUp();
      dfs.waitActive();
      FileSystem fs = dfs.getFileSystem();
      mkdir(fs, "/tmp", (short) 01777);
      mkdir(fs, "/user", (short) 0777);
      log("HDFS up at " + fs.getUri() + " after " + ms(t0) + " ms");

      long t1 = System.nanoTime();
      log("starting YARN (1 ResourceManager, " + nodeManagers + " NodeManager(s))");
      // The NodeManagers' web servers serve the containers' logs (/ws/v1/node/containerlogs).
      // In one JVM the YARN web apps would share Guice's JVM-wide GuiceFilter pipeline (every
      // YARN web port serving the last web app started); separateWebApps gives each its own.
      boolean nmWeb = boolProp("nm.web", true);
      yarn = new MiniYARNCluster("spindle", nodeManagers, 1, 1, nmWeb);
      yarn.init(new YarnConfiguration(conf));
      for (int i = 0; i < nodeManagers; i++) {
        // Each NodeManager serves on its host's address; YARN names the node by that address's
        // canonical name, the name its DataNode registered with.
        Configuration nc = yarn.getNodeManager(i).getConfig();
        nc.set(YarnConfiguration.NM_ADDRESS, hostAddress(i) + ":0");
        nc.set(YarnConfiguration.NM_WEBAPP_ADDRESS, hostAddress(i) + ":0");
      }
      yarn.start();
      ResourceManager rm = waitForYarn(nodeManagers, intProp("start.timeout.ms", 120_000));
      if (nmWeb) {
        separateWebApps(rm, nodeManagers);
      }
      log("YARN up at " + rm.getConfig().get(YarnConfiguration.RM_ADDRESS) + " after " + ms(t1) + " ms");

      Map<String, String> ready = describe(rm, nodeManagers);
      writeConf(confDir, rm.getConfig(), ready);
      if (kerberos != null) {
        kerberos.describe(ready, rm.getConfig());
        kerberos.awaitExpiry();
      }
      ready.put("conf_dir", confDir.getPath());
      ready.put("data_dir", dataDir.getPath());
      ready.put("startup_ms", Long.toString(ms(t0)));
      writeAtomically(readyFile, props(ready));
      log("READY " + readyFile + " (" + ms(t0) + " ms)");
    } catch (Throwable t) {
      t.printStackTrace(System.out);
      shutdown(readyFile);
      log("startup failed: " + t);
      System.exit(1);
    }

    // Run until SIGTERM/SIGINT; the shutdown hook does the rest.
    Thread.currentThread().join();
  }

  /**
   * The loopback address that stands for host i of the cluster: 127.0.0.1 for the first,
   * 127.0.0.2 for the second, and so on. DataNode i registers with this address's canonical name
   * (localhost, 127.0.0.2, ...) and NodeManager i serves on it, so that the cluster has as many
   * hosts as nodes, each with one DataNode and one NodeManager, as locality needs. The
   * DataNodes still listen on 127.0.0.1 (the address the NameNode sees them connect from).
   */
  static String hostAddress(int i) {
    return "127.0.0." + (i + 1);
  }

  /**
   * Sets dc up for DataNode i: it registers as host i (named host), its web server (where WebHDFS
   * sends readers and writers) listens on host i's address, and its data and IPC ports on
   * 127.0.0.1, the address the NameNode sees it connect from and gives clients.
   */
  private static Configuration setDataNode(Configuration dc, int i, String host) {
    dc.set("dfs.datanode.hostname", host);
    dc.set("dfs.datanode.address", "127.0.0.1:0");
    dc.set("dfs.datanode.ipc.address", "127.0.0.1:0");
    dc.set("dfs.datanode.http.address", hostAddress(i) + ":0");
    dc.set("dfs.datanode.https.address", hostAddress(i) + ":0");
    return dc;
  }

  /** Hadoop configuration for a small sandbox on one machine; krb is null unless in Kerberos mode. */
  private static Configuration configure(File dataDir, Kerberos krb, String[] overrides) {
    HdfsConfiguration.init();
    Configuration conf = new YarnConfiguration(new HdfsConfiguration());
    int nmMemoryMb = intProp("nm.memory.mb", 8192);
    int nmVcores = intProp("nm.vcores", 8);

    conf.set("hadoop.tmp.dir", new File(dataDir, "tmp").getPath());
    conf.set("hadoop.security.authentication", "simple");

    // HDFS
    conf.set(MiniDFSCluster.HDFS_MINIDFS_BASEDIR, new File(dataDir, "dfs").getPath());
    conf.setInt("dfs.replication", 1);
    conf.setBoolean("dfs.permissions.enabled", false);
    conf.setLong("dfs.namenode.fs-limits.min-block-size", 1024);
    conf.setInt("dfs.namenode.safemode.extension", 0);

    // YARN: addresses on localhost, ephemeral ports.
    conf.set("yarn.resourcemanager.hostname", "localhost");
    conf.setBoolean("yarn.minicluster.fixed.ports", false);
    conf.setInt("yarn.minicluster.yarn.nodemanager.resource.memory-mb", nmMemoryMb);
    conf.setInt("yarn.nodemanager.resource.memory-mb", nmMemoryMb);
    conf.setInt("yarn.nodemanager.resource.cpu-vcores", nmVcores);
    conf.setInt("yarn.scheduler.minimum-allocation-mb", intProp("min.allocation.mb", 64));
    conf.setInt("yarn.scheduler.maximum-allocation-mb", nmMemoryMb);
    conf.setInt("yarn.scheduler.minimum-allocation-vcores", 1);
    conf.setInt("yarn.scheduler.maximum-allocation-vcores", nmVcores);
    conf.setLong("yarn.resourcemanager.nodemanagers.heartbeat-interval-ms", intProp("heartbeat.ms", 100));
    conf.setBoolean("yarn.nodemanager.vmem-check-enabled", false);
    conf.setBoolean("yarn.nodemanager.pmem-check-enabled", false);
    // A node only turns unhealthy when its disk is really nearly full.
    conf.setFloat("yarn.nodemanager.disk-health-checker.max-disk-utilization-per-disk-percentage", 99.0f);
    conf.setFloat("yarn.nodemanager.disk-health-checker.disk-utilization-watermark-low-per-disk-percentage", 98.0f);
    conf.setLong("yarn.nodemanager.disk-health-checker.min-free-space-per-disk-mb", 64);
    // Keep finished containers' working dirs and logs for the tests to read.
    conf.setInt("yarn.nodemanager.delete.debug-delay-sec", intProp("debug.delay.sec", 3600));
    conf.setLong("yarn.nodemanager.log.retain-seconds", 86400);
    // Log aggregation into HDFS (/tmp/logs) makes `yarn logs` work for finished applications and
    // lets NodeManagers stop quickly (without it a finished application stays in the NodeManager
    // until its local logs are deleted, and NodeManager shutdown waits for it).
    conf.setBoolean("yarn.log-aggregation-enable", boolProp("log.aggregation", true));
    conf.set("yarn.nodemanager.remote-app-log-dir", "/tmp/logs");
    conf.set("yarn.nodemanager.container-executor.class",
        "org.apache.hadoop.yarn.server.nodemanager.DefaultContainerExecutor");
    conf.setBoolean("yarn.timeline-service.enabled", false);
    // MiniYARNCluster defaults this to a local path without a scheme, which then resolves
    // against fs.defaultFS and lands in HDFS.
    conf.set("yarn.node-attribute.fs-store.root-dir",
        new File(dataDir, "yarn-node-attributes").toURI().toString());
    conf.setBoolean("yarn.webapp.ui2.enable", false);
    // Capacity scheduler: one queue with everything; AMs may use half of it.
    conf.set("yarn.scheduler.capacity.root.queues", "default");
    conf.set("yarn.scheduler.capacity.root.default.capacity", "100");
    conf.set("yarn.scheduler.capacity.root.default.maximum-capacity", "100");
    conf.set("yarn.scheduler.capacity.root.default.state", "RUNNING");
    conf.set("yarn.scheduler.capacity.root.default.acl_submit_applications", "*");
    conf.set("yarn.scheduler.capacity.root.default.acl_administer_queue", "*");
    conf.set("yarn.scheduler.capacity.maximum-am-resource-percent", "0.5");
    // Each node is its own host (hostAddress), so that locality can be seen: an ask that names
    // a host waits for two of other nodes' heartbeats before it takes a node elsewhere, as
    // delay scheduling does on a real cluster (where the delay is longer).
    conf.setInt("yarn.scheduler.capacity.node-locality-delay", 2);
    conf.setBoolean("yarn.scheduler.include-port-in-node-name", false);
    // DataNode i registers as host i while its connections come from 127.0.0.1.
    conf.setBoolean("dfs.namenode.datanode.registration.ip-hostname-check", false);

    if (krb != null) {
      krb.configure(conf);
    }

    for (String kv : overrides) {
      int eq = kv.indexOf('=');
      if (eq <= 0) {
        throw new IllegalArgumentException("expected key=value, got: " + kv);
      }
      conf.set(kv.substring(0, eq).trim(), kv.substring(eq + 1));
    }
    return conf;
  }

  private static ResourceManager waitForYarn(int nodeManagers, long timeoutMs) throws Exception {
    long deadline = System.currentTimeMillis() + timeoutMs;
    while (true) {
      ResourceManager rm = yarn.getResourceManager();
      String missing = null;
      if (rm == null) {
        missing = "active ResourceManager";
      } else if (rm.getConfig().get(YarnConfiguration.RM_ADDRESS, ":0").endsWith(":0")
          || rm.getConfig().get(YarnConfiguration.RM_SCHEDULER_ADDRESS, ":0").endsWith(":0")) {
        missing = "ResourceManager ports";
      } else {
        int running = 0;
        for (RMNode n : rm.getRMContext().getRMNodes().values()) {
          if (n.getState() == NodeState.RUNNING) {
            running++;
          }
        }
        if (running < nodeManagers) {
          missing = "NodeManagers (" + running + "/" + nodeManagers + " RUNNING)";
        }
        for (int i = 0; missing == null && i < nodeManagers; i++) {
          NodeId id = yarn.getNodeManager(i).getNMContext().getNodeId();
          if (id == null || id.getPort() == 0) {
            missing = "NodeManager " + i + " address";
          }
        }
      }
      if (missing == null) {
        return rm;
      }
      if (System.currentTimeMillis() > deadline) {
        throw new IOException("timed out waiting for " + missing);
      }
      Thread.sleep(50);
    }
  }

  /**
   * Makes each YARN web server (the ResourceManager's and every NodeManager's) run its own web
   * app. Hadoop registers Guice's filter by class name, and such a GuiceFilter dispatches through
   * a JVM-wide pipeline that the last web app built replaces; each WebApp keeps a GuiceFilter made
   * by its own injector, which dispatches through that web app's pipeline. This puts that filter
   * in place of the shared one in each server.
   */
  private static void separateWebApps(ResourceManager rm, int nodeManagers) throws Exception {
    List<org.apache.hadoop.yarn.webapp.WebApp> apps = new ArrayList<>();
    java.lang.reflect.Field rmApp = ResourceManager.class.getDeclaredField("webApp");
    rmApp.setAccessible(true);
    apps.add((org.apache.hadoop.yarn.webapp.WebApp) rmApp.get(rm));
    java.lang.reflect.Field nmApp =
        org.apache.hadoop.yarn.server.nodemanager.webapp.WebServer.class.getDeclaredField("webApp");
    nmApp.setAccessible(true);
    for (int i = 0; i < nodeManagers; i++) {
      for (org.apache.hadoop.service.Service s : yarn.getNodeManager(i).getServices()) {
        if (s instanceof org.apache.hadoop.yarn.server.nodemanager.webapp.WebServer) {
          apps.add((org.apache.hadoop.yarn.webapp.WebApp) nmApp.get(s));
        }
      }
    }
    java.lang.reflect.Field guice = org.apache.hadoop.yarn.webapp.WebApp.class.getDeclaredField("guiceFilter");
    guice.setAccessible(true);
    java.lang.reflect.Field context = org.apache.hadoop.http.HttpServer2.class.getDeclaredField("webAppContext");
    context.setAccessible(true);
    // FilterHolder.initialize() initializes its instance only when it has none in use.
    java.lang.reflect.Field inUse = org.eclipse.jetty.servlet.FilterHolder.class.getDeclaredField("_filter");
    inUse.setAccessible(true);
    for (org.apache.hadoop.yarn.webapp.WebApp app : apps) {
      if (app == null || app.httpServer() == null) {
        continue;
      }
      javax.servlet.Filter own = (javax.servlet.Filter) guice.get(app);
      org.eclipse.jetty.webapp.WebAppContext ctx =
          (org.eclipse.jetty.webapp.WebAppContext) context.get(app.httpServer());
      org.eclipse.jetty.servlet.FilterHolder holder = ctx.getServletHandler().getFilter("guice");
      if (own == null || holder == null) {
        throw new IOException("web app " + app.name() + ": no Guice filter to replace");
      }
      synchronized (holder) {
        inUse.set(holder, null);
        holder.setFilter(own);
        holder.initialize();
      }
    }
    log("gave " + apps.size() + " YARN web servers their own web apps");
  }

  /** The addresses a client needs, as ordered key/value pairs. */
  private static Map<String, String> describe(ResourceManager rm, int nodeManagers) throws IOException {
    Map<String, String> m = new java.util.LinkedHashMap<>();
    Configuration rc = rm.getConfig();
    m.put("pid", Long.toString(ProcessHandle.current().pid()));
    m.put("hadoop_version", VersionInfo.getVersion());
    m.put("fs_default_fs", dfs.getFileSystem().getUri().toString());
    m.put("namenode_rpc_address", hostPort(dfs.getNameNode().getNameNodeAddress()));
    m.put("namenode_http_address", hostPort(dfs.getNameNode().getHttpAddress()));
    List<DataNode> dns = dfs.getDataNodes();
    m.put("datanode_count", Integer.toString(dns.size()));
    for (int i = 0; i < dns.size(); i++) {
      DataNode dn = dns.get(i);
      m.put("datanode_" + i + "_xfer_address", hostPort(dn.getXferAddress()));
      m.put("datanode_" + i + "_ipc_address", "127.0.0.1:" + dn.getIpcPort());
      m.put("datanode_" + i + "_http_address", hostAddress(i) + ":" + dn.getInfoPort());
    }
    m.put("rm_address", rc.get(YarnConfiguration.RM_ADDRESS));
    m.put("rm_scheduler_address", rc.get(YarnConfiguration.RM_SCHEDULER_ADDRESS));
    m.put("rm_resource_tracker_address", rc.get(YarnConfiguration.RM_RESOURCE_TRACKER_ADDRESS));
    m.put("rm_admin_address", rc.get(YarnConfiguration.RM_ADMIN_ADDRESS));
    m.put("rm_webapp_address", rc.get(YarnConfiguration.RM_WEBAPP_ADDRESS));
    m.put("nodemanager_count", Integer.toString(nodeManagers));
    for (int i = 0; i < nodeManagers; i++) {
      NodeManager nm = yarn.getNodeManager(i);
      NodeId id = nm.getNMContext().getNodeId();
      String host = id.getHost();
      m.put("nodemanager_" + i + "_id", id.toString());
      m.put("nodemanager_" + i + "_address", host + ":" + id.getPort());
      int httpPort = nm.getNMContext().getHttpPort();
      if (httpPort > 0) {
        m.put("nodemanager_" + i + "_webapp_address", host + ":" + httpPort);
      }
      m.put("nodemanager_" + i + "_local_dirs", nm.getConfig().get(YarnConfiguration.NM_LOCAL_DIRS));
      m.put("nodemanager_" + i + "_log_dirs", nm.getConfig().get(YarnConfiguration.NM_LOG_DIRS));
    }
    return m;
  }

  /**
   * Writes core-site.xml, hdfs-site.xml and yarn-site.xml: every property of
   * the running cluster's configuration that does not come from Hadoop's
   * built-in *-default.xml, plus the NodeManager addresses found at run time
   * (spindle.minicluster.nodemanager.N.*).
   */
  private static void writeConf(File confDir, Configuration live, Map<String, String> ready) throws IOException {
    TreeMap<String, String> core = new TreeMap<>();
    TreeMap<String, String> hdfs = new TreeMap<>();
    TreeMap<String, String> yarnSite = new TreeMap<>();
    TreeMap<String, String> all = new TreeMap<>();
    for (Map.Entry<String, String> e : live) {
      all.put(e.getKey(), e.getValue());
    }
    for (String k : all.keySet()) {
      if (fromDefaultsOnly(live, k) || internal(k)) {
        continue;
      }
      String v = live.get(k); // with variables expanded
      if (k.startsWith("yarn.")) {
        yarnSite.put(k, v);
      } else if (k.startsWith("dfs.")) {
        hdfs.put(k, v);
      } else {
        core.put(k, v);
      }
    }
    int n = Integer.parseInt(ready.get("nodemanager_count"));
    List<String> nms = new ArrayList<>();
    for (int i = 0; i < n; i++) {
      nms.add(ready.get("nodemanager_" + i + "_address"));
      for (String what : new String[] {"address", "webapp_address", "local_dirs", "log_dirs"}) {
        String v = ready.get("nodemanager_" + i + "_" + what);
        if (v != null) {
          yarnSite.put(P + "nodemanager." + i + "." + what.replace('_', '-'), v);
        }
      }
    }
    yarnSite.put(P + "nodemanagers", String.join(",", nms));
    // Java clients (and Java AMs reading this dir) give up 1-2 minutes after the cluster is
    // gone, instead of retrying for 15 minutes and more. The servers don't read these files.
    yarnSite.put("yarn.resourcemanager.connect.max-wait.ms", "30000");
    yarnSite.put("yarn.resourcemanager.connect.retry-interval.ms", "1000");
    core.put("ipc.client.connect.max.retries", "2");

    confDir.mkdirs();
    writeXml(new File(confDir, "core-site.xml"), core);
    writeXml(new File(confDir, "hdfs-site.xml"), hdfs);
    writeXml(new File(confDir, "yarn-site.xml"), yarnSite);
  }

  private static boolean fromDefaultsOnly(Configuration conf, String key) {
    String[] sources = conf.getPropertySources(key);
    if (sources == null || sources.length == 0) {
      return false;
    }
    for (String s : sources) {
      if (!s.endsWith("-default.xml")) {
        return false;
      }
    }
    return true;
  }

  /**
   * Server-side or unused settings that would only confuse a client reading
   * the conf dir (paths of the NameNode's storage, servers that are not
   * started, the servers' RPC engine registrations).
   */
  private static boolean internal(String k) {
    return k.startsWith("mapreduce.")
        || k.startsWith("hdfs.minidfs.")
        || k.startsWith("rpc.engine.")
        || k.startsWith("yarn.timeline-service.") && !k.equals("yarn.timeline-service.enabled")
        || k.equals("hadoop.http.filter.initializers")
        || k.equals("net.topology.node.switch.mapping.impl")
        || k.equals("dfs.namenode.https-address")
        || k.equals("dfs.namenode.name.dir")
        || k.equals("dfs.namenode.checkpoint.dir")
        || k.startsWith("dfs.datanode.") && !k.equals("dfs.datanode.kerberos.principal")
        || k.equals("yarn.node-attribute.fs-store.root-dir")
        // Kerberos mode: the servers' keytabs (clients have their own credentials).
        || k.contains("keytab");
  }

  /** Hadoop configuration XML, properties sorted by name. */
  private static void writeXml(File f, TreeMap<String, String> props) throws IOException {
    StringBuilder sb = new StringBuilder();
    sb.append("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    sb.append("<!-- Written by the Spindle mini cluster for its current run; regenerated on every start. -->\n");
    sb.append("<configuration>\n");
    for (Map.Entry<String, String> e : props.entrySet()) {
      sb.append("  <property><name>").append(xml(e.getKey())).append("</name><value>")
          .append(xml(e.getValue())).append("</value></property>\n");
    }
    sb.append("</configuration>\n");
    writeAtomically(f, sb.toString());
  }

  static String xml(String s) {
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace("\"", "&quot;");
  }

  private static void writeAtomically(File f, String content) throws IOException {
    File tmp = new File(f.getPath() + ".tmp");
    Files.write(tmp.toPath(), content.getBytes(StandardCharsets.UTF_8));
    Files.move(tmp.toPath(), f.toPath(), StandardCopyOption.REPLACE_EXISTING, StandardCopyOption.ATOMIC_MOVE);
  }

  private static String props(Map<String, String> m) {
    StringBuilder sb = new StringBuilder();
    for (Map.Entry<String, String> e : m.entrySet()) {
      sb.append(e.getKey()).append('=').append(e.getValue()).append('\n');
    }
    return sb.toString();
  }

  private static final java.util.concurrent.atomic.AtomicBoolean STOPPING =
      new java.util.concurrent.atomic.AtomicBoolean();

  private static void shutdown(File readyFile) {
    if (!STOPPING.compareAndSet(false, true)) {
      return;
    }
    try {
      Files.deleteIfExists(readyFile.toPath());
    } catch (IOException ignored) {
      // best effort
    }
    MiniYARNCluster y = yarn;
    if (y != null) {
      log("stopping YARN");
      try {
        y.stop();
      } catch (Throwable t) {
        log("stopping YARN failed: " + t);
      }
    }
    MiniDFSCluster d = dfs;
    if (d != null) {
      log("stopping HDFS");
      try {
        d.shutdown();
      } catch (Throwable t) {
        log("stopping HDFS failed: " + t);
      }
    }
    Kerberos k = kerberos;
    if (k != null) {
      log("stopping the KDC");
      try {
        k.stop();
      } catch (Throwable t) {
        log("stopping the KDC failed: " + t);
      }
    }
    log("stopped");
  }

  private static void mkdir(FileSystem fs, String path, short perm) throws IOException {
    Path p = new Path(path);
    fs.mkdirs(p);
    fs.setPermission(p, new FsPermission(perm));
  }

  private static String hostPort(InetSocketAddress a) {
    return a.getHostString() + ":" + a.getPort();
  }

  private static int intProp(String name, int def) {
    String v = System.getProperty(P + name);
    return v == null || v.isEmpty() ? def : Integer.parseInt(v.trim());
  }

  private static boolean boolProp(String name, boolean def) {
    String v = System.getProperty(P + name);
    return v == null || v.isEmpty() ? def : Boolean.parseBoolean(v.trim());
  }

  private static long ms(long t0) {
    return TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t0);
  }

  private static void log(String msg) {
    System.out.println("[spindle-minicluster] " + msg);
    System.out.flush();
  }
}
