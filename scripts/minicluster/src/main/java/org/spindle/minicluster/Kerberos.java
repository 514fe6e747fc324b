package org.spindle.minicluster;

import java.io.BufferedOutputStream;
import java.io.File;
import java.io.FileOutputStream;
import java.io.IOException;
import java.lang.reflect.Field;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.StandardCopyOption;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeSet;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.minikdc.MiniKdc;
import org.apache.hadoop.security.UserGroupInformation;
import org.apache.kerby.KOptions;
import org.apache.kerby.kerberos.kerb.admin.kadmin.local.LocalKadmin;
import org.apache.kerby.kerberos.kerb.ccache.CredCacheOutputStream;
import org.apache.kerby.kerberos.kerb.ccache.Credential;
import org.apache.kerby.kerberos.kerb.ccache.CredentialCache;
import org.apache.kerby.kerberos.kerb.client.KrbClient;
import org.apache.kerby.kerberos.kerb.client.KrbOption;
import org.apache.kerby.kerberos.kerb.server.KdcConfigKey;
import org.apache.kerby.kerberos.kerb.server.SimpleKdcServer;
import org.apache.kerby.kerberos.kerb.type.ticket.TgtTicket;

/**
 * The Kerberos side of the mini cluster ({@code scripts/minicluster.sh start --kerberos}): a KDC
 * (Hadoop's MiniKdc, which runs Apache Kerby's SimpleKdcServer) in the cluster JVM, started before
 * HDFS and YARN, its principals, keytabs and ticket caches, and the Hadoop settings that run the
 * servers with Kerberos.
 *
 * <p>Every file is under one directory (the state dir's {@code kdc/}):
 * <ul>
 * <li>{@code krb5.conf}: realm, KDC address (TCP only), AES enctypes; for MIT-style clients
 *     (gokrb5) and for Java ({@code -Djava.security.krb5.conf}).
 * <li>{@code service.keytab}: {@value #SERVICE} and {@value #HTTP}. Hadoop's login user is
 *     JVM-wide and every server logs in again from its own keytab setting, so all servers use
 *     the same principal, literally (no _HOST).
 * <li>{@code alice.keytab}, {@code alice.ccache} (a TGT for alice, MIT ccache format 4),
 *     {@code wrong.keytab} (alice, with a key the KDC no longer has) and {@code expired.ccache}
 *     (a TGT for alice that expired seconds after it was issued).
 * </ul>
 */
final class Kerberos {
  /** The principal of every Hadoop server in the JVM (NameNode, DataNodes, RM, NMs). */
  static final String SERVICE = "spindle/localhost";
  /** The principal of the servers' SPNEGO endpoints (WebHDFS). */
  static final String HTTP = "HTTP/localhost";
  /** The test user. */
  static final String USER = "alice";
  /** The enctypes of every key the KDC makes: those gokrb5 v8 and Java 17 support. */
  static final String ENCTYPES = "aes256-cts-hmac-sha1-96 aes128-cts-hmac-sha1-96";
  /** Lifetime of the TGT in expired.ccache; the KDC grants no ticket shorter than 3.6 s. */
  static final int EXPIRED_LIFETIME_S = 5;

  private final MiniKdc kdc;
  final File dir;
  final String realm;
  final String host;
  final int port;
  final File krb5Conf;
  final File serviceKeytab;
  final File userKeytab;
  final File wrongKeytab;
  final File userCcache;
  final File expiredCcache;
  /** The Hadoop settings configure makes. */
  private final Set<String> keys = new TreeSet<>();
  /** When the TGT in expired.ccache expires (ms since the epoch). */
  private long expiredAt;

  private Kerberos(MiniKdc kdc, File dir) {
    this.kdc = kdc;
    this.dir = dir;
    this.realm = kdc.getRealm();
    this.host = kdc.getHost();
    this.port = kdc.getPort();
    this.krb5Conf = new File(dir, "krb5.conf");
    this.serviceKeytab = new File(dir, "service.keytab");
    this.userKeytab = new File(dir, USER + ".keytab");
    this.wrongKeytab = new File(dir, "wrong.keytab");
    this.userCcache = new File(dir, USER + ".ccache");
    this.expiredCcache = new File(dir, "expired.ccache");
  }

  /**
   * Starts the KDC on 127.0.0.1 (an ephemeral TCP port), makes the principals, keytabs and
   * ticket caches in dir, writes dir/krb5.conf and points this JVM's Kerberos at it.
   */
  static Kerberos start(File dir) throws Exception {
    dir.mkdirs();
    Properties kc = MiniKdc.createConf();
    kc.setProperty(MiniKdc.KDC_BIND_ADDRESS, "127.0.0.1");
    kc.setProperty(MiniKdc.KDC_PORT, "0");
    kc.setProperty(MiniKdc.TRANSPORT, "TCP"); // MiniKdc serves TCP or UDP, not both
    MiniKdc kdc = new MiniKdc(kc, new File(dir, "work"));
    kdc.start();
    try {
      SimpleKdcServer server = simpleKdc(kdc);
      LocalKadmin kadmin = server.getKadmin();
      // Kerby's KDC makes AES128 and DES3 keys by default (Java 17 refuses DES3, gokrb5 does
      // not have it). Keys made from now on are AES256 and AES128; the ticket-granting
      // service's key, made when the KDC started, is made again.
      server.getKdcConfig().setString(KdcConfigKey.ENCRYPTION_TYPES, ENCTYPES);
      String realm = kdc.getRealm();
      kadmin.updateKeys("krbtgt/" + realm + "@" + realm);

      Kerberos k = new Kerberos(kdc, dir);
      k.writeKrb5Conf();
      kdc.createPrincipal(k.serviceKeytab, SERVICE, HTTP);
      // wrong.keytab holds alice's first key; the KDC then gets a new one, the one in alice.keytab.
      kdc.createPrincipal(k.wrongKeytab, USER);
      kadmin.updateKeys(k.principal(USER));
      Files.deleteIfExists(k.userKeytab.toPath());
      kadmin.exportKeytab(k.userKeytab, k.principal(USER));

      KrbClient client = server.getKrbClient();
      storeCcache(client.requestTgt(k.principal(USER), k.userKeytab), k.userCcache);
      KOptions shortLived = new KOptions();
      shortLived.add(KrbOption.CLIENT_PRINCIPAL, k.principal(USER));
      shortLived.add(KrbOption.USE_KEYTAB, true);
      shortLived.add(KrbOption.KEYTAB_FILE, k.userKeytab);
      shortLived.add(KrbOption.LIFE_TIME, EXPIRED_LIFETIME_S);
      TgtTicket expiring = client.requestTgt(shortLived);
      storeCcache(expiring, k.expiredCcache);
      for (File f : new File[] {k.serviceKeytab, k.userKeytab, k.wrongKeytab}) {
        ownerOnly(f);
      }
      k.expiredAt = expiring.getEncKdcRepPart().getEndTime().getTime();
      return k;
    } catch (Exception | Error e) {
      kdc.stop();
      throw e;
    }
  }

  /** MiniKdc does not hand out its Kerby server, which has the admin and client interfaces. */
  private static SimpleKdcServer simpleKdc(MiniKdc kdc) throws ReflectiveOperationException {
    Field f = MiniKdc.class.getDeclaredField("simpleKdc");
    f.setAccessible(true);
    return (SimpleKdcServer) f.get(kdc);
  }

  /**
   * Stores tgt in ccache, in the MIT file format version 4 (with an empty header). Kerby's own
   * CredentialCache.store writes version 3, whose keyblocks differ (the enctype twice), so the
   * file is written here with Kerby's serializer for version 4.
   */
  private static void storeCcache(TgtTicket tgt, File ccache) throws IOException {
    File tmp = new File(ccache.getPath() + ".tmp");
    try (CredCacheOutputStream out = new CredCacheOutputStream(new BufferedOutputStream(new FileOutputStream(tmp)))) {
      out.writeShort(CredentialCache.FCC_FVNO_4);
      out.writeShort(0); // header length: no tags
      out.writePrincipal(tgt.getClientPrincipal(), CredentialCache.FCC_FVNO_4);
      new Credential(tgt).store(out, CredentialCache.FCC_FVNO_4);
    }
    ownerOnly(tmp);
    Files.move(tmp.toPath(), ccache.toPath(), StandardCopyOption.REPLACE_EXISTING, StandardCopyOption.ATOMIC_MOVE);
  }

  private static void ownerOnly(File f) throws IOException {
    Files.setPosixFilePermissions(f.toPath(), PosixFilePermissions.fromString("rw-------"));
  }

  /**
   * krb5.conf for MIT-style clients (gokrb5, MIT's tools) and for Java: TCP only (the KDC does
   * not listen on UDP), AES only, no DNS.
   */
  private void writeKrb5Conf() throws IOException {
    String s = "# Written by the Spindle mini cluster (start --kerberos) for its current run.\n"
        + "[libdefaults]\n"
        + "    default_realm = " + realm + "\n"
        + "    dns_lookup_kdc = false\n"
        + "    dns_lookup_realm = false\n"
        + "    dns_canonicalize_hostname = false\n"
        + "    rdns = false\n"
        + "    udp_preference_limit = 1\n"
        + "    default_tkt_enctypes = " + ENCTYPES + "\n"
        + "    default_tgs_enctypes = " + ENCTYPES + "\n"
        + "    permitted_enctypes = " + ENCTYPES + "\n"
        + "    ticket_lifetime = 24h\n"
        + "\n"
        + "[realms]\n"
        + "    " + realm + " = {\n"
        + "        kdc = " + kdcAddress() + "\n"
        + "    }\n"
        + "\n"
        + "[domain_realm]\n"
        + "    localhost = " + realm + "\n";
    Files.write(krb5Conf.toPath(), s.getBytes(StandardCharsets.UTF_8));
    // MiniKdc pointed this JVM at Kerby's krb5.conf (which names the KDC "localhost"); nothing in
    // the JVM has read it yet.
    System.setProperty(MiniKdc.JAVA_SECURITY_KRB5_CONF, krb5Conf.getPath());
  }

  String principal(String name) {
    return name + "@" + realm;
  }

  String kdcAddress() {
    return host + ":" + port;
  }

  /**
   * The Hadoop settings of Kerberos mode, applied before the command line's key=value overrides
   * (so that e.g. hadoop.rpc.protection=privacy takes effect).
   */
  void configure(Configuration conf) {
    String svc = principal(SERVICE);
    String http = principal(HTTP);
    String keytab = serviceKeytab.getPath();
    put(conf, "hadoop.security.authentication", "kerberos");
    put(conf, "hadoop.rpc.protection", "authentication");

    // HDFS: the NameNode and the DataNodes as spindle/localhost; SASL on the DataNodes' data
    // transfer port, with block access tokens. DataNodes without privileged ports and without
    // HTTPS refuse to start in secure mode unless told this is a test.
    put(conf, "dfs.namenode.kerberos.principal", svc);
    put(conf, "dfs.namenode.keytab.file", keytab);
    put(conf, "dfs.datanode.kerberos.principal", svc);
    put(conf, "dfs.datanode.keytab.file", keytab);
    put(conf, "dfs.web.authentication.kerberos.principal", http);
    put(conf, "dfs.web.authentication.kerberos.keytab", keytab);
    put(conf, "dfs.block.access.token.enable", "true");
    put(conf, "dfs.data.transfer.protection", "authentication");
    put(conf, "ignore.secure.ports.for.testing", "true");

    // YARN: the ResourceManager and the NodeManagers as spindle/localhost. The RM renews the
    // HDFS delegation tokens that applications are submitted with (renewer: its principal).
    put(conf, "yarn.resourcemanager.principal", svc);
    put(conf, "yarn.resourcemanager.keytab", keytab);
    put(conf, "yarn.nodemanager.principal", svc);
    put(conf, "yarn.nodemanager.keytab", keytab);
    put(conf, "yarn.resourcemanager.webapp.spnego-principal", http);
    put(conf, "yarn.resourcemanager.webapp.spnego-keytab-file", keytab);
    put(conf, "yarn.nodemanager.webapp.spnego-principal", http);
    put(conf, "yarn.nodemanager.webapp.spnego-keytab-file", keytab);
    // Every web server (the consoles, the REST APIs, the ResourceManager's proxy to the
    // ApplicationMasters) asks for Kerberos too, as on clusters that secure their web consoles:
    // a request without a SPNEGO token is answered 401 "WWW-Authenticate: Negotiate".
    put(conf, "hadoop.http.authentication.type", "kerberos");
    put(conf, "hadoop.http.authentication.kerberos.principal", http);
    put(conf, "hadoop.http.authentication.kerberos.keytab", keytab);
    put(conf, "hadoop.http.authentication.simple.anonymous.allowed", "false");
    put(conf, "hadoop.http.filter.initializers", "org.apache.hadoop.security.AuthenticationFilterInitializer");
    // Log aggregation is off by default in this mode (the script's SPINDLE_MINICLUSTER_LOG_AGGREGATION:
    // the NodeManagers would read the logs with SecureIOUtils, which needs Hadoop's native library).
    // Without it a NodeManager keeps a finished application for log.retain-seconds, and waits for
    // such applications when it stops (17 s per NodeManager). With 0 it lets them go at once; the
    // logs stay in its log dirs for yarn.nodemanager.delete.debug-delay-sec (an hour) all the same.
    put(conf, "yarn.nodemanager.log.retain-seconds", "0");
    // Containers need the realm too (Hadoop's Java code fails with "Can't get Kerberos realm"
    // without it), and there is no /etc/krb5.conf: the NodeManagers give every container
    // KRB5_CONFIG (MIT-style clients, gokrb5) and, as Java reads no such variable,
    // JAVA_TOOL_OPTIONS=-Djava.security.krb5.conf=... (each JVM then says "Picked up
    // JAVA_TOOL_OPTIONS" on stderr). MALLOC_ARENA_MAX is YARN's default admin environment.
    put(conf, "yarn.nodemanager.admin-env", "MALLOC_ARENA_MAX=$MALLOC_ARENA_MAX,KRB5_CONFIG=" + krb5Conf.getPath()
        + ",JAVA_TOOL_OPTIONS=-Djava.security.krb5.conf=" + krb5Conf.getPath());
  }

  /**
   * Writes the Kerberos settings (their values in conf, after the overrides) as the core-site.xml
   * of this JVM's classpath (the script puts this file's directory first on it in Kerberos mode),
   * for the Configurations that servers make from scratch rather than from the one given to
   * them: e.g. the NodeManager's in-process resource localizer reads HDFS with such a
   * Configuration, and without dfs.data.transfer.protection it would skip the SASL handshake
   * the DataNodes require.
   */
  void writeJvmSite(Configuration conf) throws IOException {
    StringBuilder sb = new StringBuilder();
    sb.append("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    sb.append("<!-- Kerberos settings for the mini cluster JVM's own default configuration. -->\n");
    sb.append("<configuration>\n");
    for (String k : keys) {
      sb.append("  <property><name>").append(k).append("</name><value>").append(MiniCluster.xml(conf.get(k)))
          .append("</value></property>\n");
    }
    sb.append("</configuration>\n");
    File site = new File(jvmConfDir(dir), "core-site.xml");
    site.getParentFile().mkdirs();
    Files.write(site.toPath(), sb.toString().getBytes(StandardCharsets.UTF_8));
  }

  /** The directory of the cluster JVM's core-site.xml in Kerberos mode (see writeJvmSite). */
  static File jvmConfDir(File kdcDir) {
    return new File(kdcDir, "jvm-conf");
  }

  /** conf.set(key, value), noting the key for writeJvmSite. */
  private void put(Configuration conf, String key, String value) {
    conf.set(key, value);
    keys.add(key);
  }

  /** Logs this JVM in as the servers' principal, before any server starts. */
  void login(Configuration conf) throws IOException {
    UserGroupInformation.setConfiguration(conf);
    UserGroupInformation.loginUserFromKeytab(principal(SERVICE), serviceKeytab.getPath());
  }

  /** Waits until the TGT in expired.ccache has expired (it has, unless the start was very quick). */
  void awaitExpiry() throws InterruptedException {
    long wait = expiredAt + 1000 - System.currentTimeMillis();
    if (wait > 0) {
      Thread.sleep(wait);
    }
  }

  /** The ready file's Kerberos lines. */
  void describe(Map<String, String> m, Configuration live) {
    m.put("kerberos", "true");
    m.put("kerberos_realm", realm);
    m.put("kdc_address", kdcAddress());
    m.put("krb5_conf", krb5Conf.getPath());
    m.put("kerberos_principal", principal(USER));
    m.put("kerberos_keytab", userKeytab.getPath());
    m.put("kerberos_ccache", userCcache.getPath());
    m.put("kerberos_wrong_keytab", wrongKeytab.getPath());
    m.put("kerberos_expired_ccache", expiredCcache.getPath());
    m.put("kerberos_service_principal", principal(SERVICE));
    m.put("kerberos_http_principal", principal(HTTP));
    m.put("hadoop_rpc_protection", live.get("hadoop.rpc.protection"));
    m.put("dfs_data_transfer_protection", live.get("dfs.data.transfer.protection"));
  }

  void stop() {
    kdc.stop();
  }
}
