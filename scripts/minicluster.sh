#!/usr/bin/env bash
# A real Hadoop mini cluster (HDFS + YARN in one JVM) for Spindle's tests.
#
#   scripts/minicluster.sh start [--kerberos] [key=value ...]
#                                                  build on first use, start, wait until HDFS and YARN are usable
#   scripts/minicluster.sh stop                    stop the cluster and every process it started (containers too)
#   scripts/minicluster.sh status                  exit 0 and print one line if running and ready
#   scripts/minicluster.sh env                     eval "$(scripts/minicluster.sh env)" for HADOOP_CONF_DIR etc.
#   scripts/minicluster.sh hdfs [dfs] ARGS...      Hadoop's FsShell (also: dfsadmin, fsck, getconf)
#   scripts/minicluster.sh yarn SUBCOMMAND ARGS... application|app|applicationattempt|container|node|logs|
#                                                  queue|cluster|rmadmin|top|nodeattributes|schedulerconf|version
#   scripts/minicluster.sh dshell ARGS...          Hadoop's DistributedShell client (-jar is added for you)
#   scripts/minicluster.sh classpath               the client classpath (conf dir first)
#   scripts/minicluster.sh build                   only build the launcher and resolve the classpath
#
# `start` takes optional key=value Hadoop configuration overrides, e.g.
#   scripts/minicluster.sh start yarn.resourcemanager.am.max-attempts=1
# `start --kerberos` secures HDFS and YARN with Kerberos, the KDC in the cluster JVM (see below).
#
# The cluster is Hadoop's MiniDFSCluster (1 NameNode, DataNodes) and MiniYARNCluster (1 ResourceManager,
# NodeManagers) from Maven Central, started by scripts/minicluster/src/main/java/.../MiniCluster.java.
# All servers listen on loopback, on ephemeral ports; the addresses are in
# $SPINDLE_MINICLUSTER_DIR/ready (key=value) and in conf/{core,hdfs,yarn}-site.xml. DataNode i and
# NodeManager i stand on "host" i: the first on localhost (127.0.0.1), the second on 127.0.0.2, and so on,
# so that block locations and container placement tell nodes apart (the locality tests need it); the
# scheduler names nodes by host alone (yarn.scheduler.include-port-in-node-name=false).
#
# Kerberos mode (`start --kerberos`; `status`, `env` and the clients follow the running mode, `stop`
# stops the KDC too): the cluster JVM first starts a KDC (Hadoop's MiniKdc on Apache Kerby: realm
# EXAMPLE.COM, TCP only, on 127.0.0.1 and an ephemeral port, AES keys only), then HDFS and YARN with
# hadoop.security.authentication=kerberos. Everything Kerberos is in $SPINDLE_MINICLUSTER_DIR/kdc/:
#   krb5.conf        for MIT-style clients (gokrb5: KRB5_CONFIG) and Java (-Djava.security.krb5.conf)
#   service.keytab   spindle/localhost@EXAMPLE.COM, the principal of every server (they share the JVM,
#                    whose Hadoop login user is JVM-wide), and HTTP/localhost@EXAMPLE.COM (SPNEGO)
#   alice.keytab     the test user alice@EXAMPLE.COM
#   alice.ccache     a TGT for alice (MIT ccache format 4, valid 24 h)
#   wrong.keytab     alice with a key the KDC no longer has: logging in with it fails pre-authentication
#   expired.ccache   a TGT for alice that expired seconds after it was issued, before the cluster was ready
#   jvm-conf/        the cluster JVM's own core-site.xml (the Kerberos settings)
# HDFS: block access tokens; SASL on the DataNodes' data transfer port (dfs.data.transfer.protection=
# authentication, which `start --kerberos dfs.data.transfer.protection=privacy` changes) on
# unprivileged ports and plain HTTP (ignore.secure.ports.for.testing=true, no HTTPS);
# hadoop.rpc.protection=authentication, which `start --kerberos hadoop.rpc.protection=privacy`
# changes. YARN: DefaultContainerExecutor (containers run as this script's user, whatever the
# application's user); the ResourceManager renews the HDFS delegation tokens applications come with
# (renewer: its principal); containers get KRB5_CONFIG and JAVA_TOOL_OPTIONS=-Djava.security.krb5.conf.
# Log aggregation is off (it needs Hadoop's native library with Kerberos): container logs are only in
# the NodeManagers' log dirs (nodemanager_N_log_dirs in ready), neither `yarn logs` nor the
# NodeManagers' web servers can read them. Every web server asks for Kerberos (SPNEGO, as HTTP/localhost):
# hadoop.http.authentication.type=kerberos. The conf dir has the principals and protections, no keytab
# paths. `env` then also exports KRB5_CONFIG, KRB5CCNAME=FILE:<alice.ccache> and
# SPINDLE_MINICLUSTER_{KERBEROS=1,REALM,KDC,PRINCIPAL,KEYTAB,WRONG_KEYTAB,EXPIRED_CCACHE}; in plain mode
# it unsets those (KRB5_CONFIG and KRB5CCNAME only when they point into this state dir's kdc/).
# HADOOP_USER_NAME means nothing to a secure cluster: who you are is in the ticket. The hdfs, yarn and
# dshell commands use the ticket cache KRB5CCNAME names (FILE:path or path), alice's when it is unset.
#
# Environment knobs (defaults in brackets):
#   SPINDLE_MINICLUSTER_DIR             state dir: conf/, data/, logs, pid, build cache [<repo>/.minicluster]
#   SPINDLE_MINICLUSTER_HADOOP_VERSION  Hadoop version from Maven Central [3.4.2]
#   SPINDLE_MINICLUSTER_NODEMANAGERS    number of NodeManagers [2]
#   SPINDLE_MINICLUSTER_DATANODES       number of DataNodes [2] (two, like the NodeManagers, so that tests
#                                       can place a file's blocks on one of them; each costs ~40 MiB of heap)
#   SPINDLE_MINICLUSTER_NM_MEMORY_MB    memory each NodeManager advertises [8192]
#   SPINDLE_MINICLUSTER_NM_VCORES       vcores each NodeManager advertises [8]
#   SPINDLE_MINICLUSTER_MIN_ALLOCATION_MB  yarn.scheduler.minimum-allocation-mb [64]
#   SPINDLE_MINICLUSTER_HEARTBEAT_MS    NodeManager heartbeat interval [100]
#   SPINDLE_MINICLUSTER_LOG_AGGREGATION  aggregate container logs into HDFS /tmp/logs (for `yarn logs`) [true;
#                                       false in Kerberos mode, where it needs Hadoop's native library]
#   SPINDLE_MINICLUSTER_NM_WEB          NodeManager web servers, which serve the containers' logs; each YARN
#                                       web server gets its own web app (see separateWebApps) [true]
#   SPINDLE_MINICLUSTER_HEAP            -Xmx of the cluster JVM [1g]
#   SPINDLE_MINICLUSTER_START_TIMEOUT   seconds `start` waits for readiness [300]
#   SPINDLE_MINICLUSTER_STOP_TIMEOUT    seconds `stop` waits before SIGKILL [60]
#   SPINDLE_MINICLUSTER_CLIENT_HEAP     -Xmx of hdfs/yarn/dshell client JVMs [256m]
#   SPINDLE_MINICLUSTER_CLIENT_LOG_LEVEL  log4j level of the client JVMs [WARN; INFO for dshell]
#   SPINDLE_MINICLUSTER_MAVEN_ARGS      extra arguments for mvn (e.g. -Dmaven.repo.local=...)

set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)"
REPO_DIR="$(cd "$SCRIPT_DIR/.." && pwd -P)"
SRC_DIR="$SCRIPT_DIR/minicluster"
MAIN_CLASS=org.spindle.minicluster.MiniCluster

HADOOP_VERSION="${SPINDLE_MINICLUSTER_HADOOP_VERSION:-3.4.2}"
NODEMANAGERS="${SPINDLE_MINICLUSTER_NODEMANAGERS:-2}"
DATANODES="${SPINDLE_MINICLUSTER_DATANODES:-2}"
NM_MEMORY_MB="${SPINDLE_MINICLUSTER_NM_MEMORY_MB:-8192}"
NM_VCORES="${SPINDLE_MINICLUSTER_NM_VCORES:-8}"
MIN_ALLOCATION_MB="${SPINDLE_MINICLUSTER_MIN_ALLOCATION_MB:-64}"
HEARTBEAT_MS="${SPINDLE_MINICLUSTER_HEARTBEAT_MS:-100}"
LOG_AGGREGATION="${SPINDLE_MINICLUSTER_LOG_AGGREGATION:-}"  # default set by cmd_start (mode)
NM_WEB="${SPINDLE_MINICLUSTER_NM_WEB:-true}"
HEAP="${SPINDLE_MINICLUSTER_HEAP:-1g}"
START_TIMEOUT="${SPINDLE_MINICLUSTER_START_TIMEOUT:-300}"
STOP_TIMEOUT="${SPINDLE_MINICLUSTER_STOP_TIMEOUT:-60}"
CLIENT_HEAP="${SPINDLE_MINICLUSTER_CLIENT_HEAP:-256m}"

say() { echo "minicluster: $*" >&2; }
die() { echo "minicluster: error: $*" >&2; exit 1; }

state_dir_init() {
  local d="${SPINDLE_MINICLUSTER_DIR:-$REPO_DIR/.minicluster}"
  mkdir -p "$d" || die "cannot create the state directory $d"
  STATE_DIR="$(cd "$d" && pwd -P)"
  BUILD_DIR="$STATE_DIR/build"
  CP_FILE="$BUILD_DIR/classpath.txt"
  CLASSES_DIR="$BUILD_DIR/classes"
  STAMP_FILE="$BUILD_DIR/stamp"
  CONF_DIR="$STATE_DIR/conf"
  DATA_DIR="$STATE_DIR/data"
  LOG_FILE="$STATE_DIR/minicluster.log"
  PID_FILE="$STATE_DIR/minicluster.pid"
  READY_FILE="$STATE_DIR/ready"
  KDC_DIR="$STATE_DIR/kdc"
}

# ---------------------------------------------------------------- tools

# apt_install PACKAGE... installs Debian packages when we can (root + apt-get), else fails.
apt_install() {
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    say "installing $* with apt-get"
    DEBIAN_FRONTEND=noninteractive apt-get update -qq >&2 || die "apt-get update failed"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >&2 \
      || die "apt-get install $* failed"
  else
    return 1
  fi
}

find_java() {
  local need_javac="$1"
  if [ -n "${JAVA_HOME:-}" ] && [ -x "$JAVA_HOME/bin/java" ]; then
    :
  elif command -v java >/dev/null 2>&1; then
    JAVA_HOME="$(dirname "$(dirname "$(readlink -f "$(command -v java)")")")"
  else
    apt_install default-jdk-headless || die "java not found: install a JDK 11 or newer (17 recommended), e.g. 'apt-get install default-jdk-headless', or set JAVA_HOME"
    JAVA_HOME="$(dirname "$(dirname "$(readlink -f "$(command -v java)")")")"
  fi
  JAVA="$JAVA_HOME/bin/java"
  [ -x "$JAVA" ] || die "java not found at $JAVA (JAVA_HOME=$JAVA_HOME)"
  if [ "$need_javac" = 1 ] && [ ! -x "$JAVA_HOME/bin/javac" ]; then
    apt_install default-jdk-headless || die "javac not found in $JAVA_HOME: install a JDK (not just a JRE), e.g. 'apt-get install default-jdk-headless'"
    [ -x "$JAVA_HOME/bin/javac" ] || die "javac not found in $JAVA_HOME after installing default-jdk-headless; set JAVA_HOME to a JDK"
  fi
  JAVAC="$JAVA_HOME/bin/javac"
  local v
  v="$("$JAVA" -version 2>&1 | sed -n 's/.* version "\([0-9][0-9]*\).*/\1/p;T;q')"
  [ -n "$v" ] || die "cannot tell the version of $JAVA"
  [ "$v" -ge 11 ] || die "$JAVA is Java $v; Hadoop $HADOOP_VERSION with these flags needs Java 11 or newer (17 recommended)"
  JAVA_MAJOR="$v"
  export JAVA_HOME
}

find_maven() {
  if ! command -v mvn >/dev/null 2>&1; then
    apt_install maven || die "mvn not found: install Apache Maven 3.6 or newer, e.g. 'apt-get install maven'"
  fi
  MVN="$(command -v mvn)"
}

# JVM flags Hadoop needs on Java 17 (Guice/cglib in the web apps, reflection on JDK internals).
ADD_OPENS=()
for p in java.io java.lang java.lang.invoke java.lang.reflect java.math java.net java.nio java.text \
         java.util java.util.concurrent java.util.concurrent.atomic java.util.zip jdk.internal.ref \
         sun.nio.ch sun.nio.cs sun.security.action sun.security.util sun.security.x509 sun.util.calendar; do
  ADD_OPENS+=("--add-opens=java.base/$p=ALL-UNNAMED")
done
ADD_OPENS+=(--add-exports=java.base/sun.net.dns=ALL-UNNAMED --add-exports=java.base/sun.net.util=ALL-UNNAMED)

# ---------------------------------------------------------------- build

# Two cache keys: the classpath depends on the pom and the Hadoop version (Maven runs only when
# they change); the compiled launcher also depends on its sources and the Java version.
classpath_key() {
  { echo "hadoop=$HADOOP_VERSION maven-args=${SPINDLE_MINICLUSTER_MAVEN_ARGS:-}"; cat "$SRC_DIR/pom.xml"; } \
    | sha256sum | cut -d' ' -f1
}

classes_key() {
  {
    echo "classpath=$(classpath_key) java=$JAVA_MAJOR"
    find "$SRC_DIR/src" -type f | LC_ALL=C sort | xargs cat
  } | sha256sum | cut -d' ' -f1
}

classpath_complete() {
  [ -s "$CP_FILE" ] || return 1
  local jar
  local IFS=:
  # shellcheck disable=SC2013
  for jar in $(cat "$CP_FILE"); do
    [ -e "$jar" ] || return 1
  done
}

# ensure_built: resolve the classpath with Maven and compile the launcher, only when their inputs change.
ensure_built() {
  find_java 0
  local cp_key
  cp_key="$(classpath_key)"
  if ! { [ -f "$CP_FILE.key" ] && [ "$(cat "$CP_FILE.key")" = "$cp_key" ] && classpath_complete; }; then
    find_maven
    mkdir -p "$BUILD_DIR"
    say "resolving Hadoop $HADOOP_VERSION from Maven Central (the first run downloads ~140 MB into the local Maven repository)"
    local t0=$SECONDS
    # shellcheck disable=SC2086
    if ! "$MVN" -B -q -f "$SRC_DIR/pom.xml" -Dhadoop.version="$HADOOP_VERSION" \
          ${SPINDLE_MINICLUSTER_MAVEN_ARGS:-} \
          dependency:build-classpath -Dmdep.outputFile="$CP_FILE.tmp" -Dmdep.includeScope=runtime \
          >"$BUILD_DIR/maven.log" 2>&1; then
      tail -n 30 "$BUILD_DIR/maven.log" >&2
      die "mvn dependency:build-classpath failed (full output: $BUILD_DIR/maven.log)"
    fi
    [ -s "$CP_FILE.tmp" ] || die "mvn produced an empty classpath (see $BUILD_DIR/maven.log)"
    mv "$CP_FILE.tmp" "$CP_FILE"
    echo "$cp_key" >"$CP_FILE.key"
    say "classpath resolved in $((SECONDS - t0))s ($(tr ':' '\n' <"$CP_FILE" | wc -l) jars)"
  fi
  local key
  key="$(classes_key)"
  if [ -f "$STAMP_FILE" ] && [ -d "$CLASSES_DIR" ] && [ "$(cat "$STAMP_FILE")" = "$key" ]; then
    return 0
  fi
  find_java 1
  say "compiling the launcher"
  rm -rf "$CLASSES_DIR.tmp"
  mkdir -p "$CLASSES_DIR.tmp"
  local srcs=() f
  while IFS= read -r f; do srcs+=("$f"); done < <(find "$SRC_DIR/src/main/java" -name '*.java' | LC_ALL=C sort)
  if ! "$JAVAC" --release 11 -nowarn -encoding UTF-8 -d "$CLASSES_DIR.tmp" -cp "$(cat "$CP_FILE")" "${srcs[@]}" \
       >"$BUILD_DIR/javac.log" 2>&1; then
    cat "$BUILD_DIR/javac.log" >&2
    die "javac failed"
  fi
  rm -rf "$CLASSES_DIR"
  mv "$CLASSES_DIR.tmp" "$CLASSES_DIR"
  echo "$key" >"$STAMP_FILE"
}

# ---------------------------------------------------------------- processes

# cluster_pid: the pid of our cluster JVM, if it is alive; empty otherwise.
cluster_pid() {
  local pid
  [ -f "$PID_FILE" ] || return 0
  pid="$(cat "$PID_FILE" 2>/dev/null || true)"
  [[ "$pid" =~ ^[0-9]+$ ]] || return 0
  [ -r "/proc/$pid/cmdline" ] || return 0
  # (grep reads the file itself: with pipefail, `tr | grep -q` can fail on SIGPIPE.)
  if grep -qzxF -- "-Dspindle.minicluster.dir=$STATE_DIR" "/proc/$pid/cmdline" 2>/dev/null; then
    echo "$pid"
  fi
}

# ready_value KEY: a value from the ready file.
ready_value() { sed -n "s/^$1=//p;T;q" "$READY_FILE" 2>/dev/null || true; }

# pid_kerberos PID: "true" if the cluster JVM PID runs in Kerberos mode, else "false".
pid_kerberos() {
  if grep -qzxF -- "-Dspindle.minicluster.kerberos=true" "/proc/$1/cmdline" 2>/dev/null; then
    echo true
  else
    echo false
  fi
}

mode_name() { if [ "$1" = true ]; then echo Kerberos; else echo plain; fi; }

is_ready() {
  local pid="$1"
  [ -n "$pid" ] && [ -f "$READY_FILE" ] && [ "$(ready_value pid)" = "$pid" ]
}

tcp_open() {
  local hp="$1"
  local host="${hp%:*}" port="${hp##*:}"
  (exec 3<>"/dev/tcp/$host/$port") 2>/dev/null
}

# leftover_pids [JVM_PID]: live processes that belong to this cluster: the JVM's process group and
# session, container processes (working dir in a NodeManager's usercache, or LOG_DIRS pointing
# into our data dir), and everything else in the sessions such processes lead (the NodeManager
# starts each container with setsid).
leftover_pids() {
  local jvm="${1:-}" d p rest line
  local -A sess_of=() matched=()
  for d in /proc/[0-9]*; do
    p="${d#/proc/}"
    { read -r rest <"$d/stat"; } 2>/dev/null || continue
    rest="${rest##*) }"          # the fields after "(comm) ": state ppid pgid sid ...
    # shellcheck disable=SC2086
    set -- $rest
    [ "$1" = Z ] && continue     # zombies are already dead
    sess_of[$p]="$4"
    if [ -n "$jvm" ] && { [ "$3" = "$jvm" ] || [ "$4" = "$jvm" ]; }; then
      matched[$p]=1
    fi
  done
  while IFS= read -r line; do
    p="${line#/proc/}"; p="${p%%/*}"
    [ -n "${sess_of[$p]:-}" ] && matched[$p]=1
  done < <(
    find /proc/[0-9]*/cwd -maxdepth 0 -printf '%p %l\n' 2>/dev/null \
      | grep -F -- " $DATA_DIR/" | grep -E -- '/(usercache|nmPrivate)/' || true
    grep -lzsF -- "LOG_DIRS=$DATA_DIR/" /proc/[0-9]*/environ 2>/dev/null || true
  )
  unset "matched[$$]" "matched[$BASHPID]"
  local -A leaders=()
  for p in "${!matched[@]}"; do
    [ "${sess_of[$p]:-}" = "$p" ] && leaders[$p]=1
  done
  for p in "${!sess_of[@]}"; do
    [ -n "${leaders[${sess_of[$p]}]:-}" ] && matched[$p]=1
  done
  unset "matched[$$]" "matched[$BASHPID]"
  for p in "${!matched[@]}"; do
    echo "$p"
  done
}

# proc_alive PID: the process exists and is not a zombie.
proc_alive() {
  local rest
  { read -r rest <"/proc/$1/stat"; } 2>/dev/null || return 1
  rest="${rest##*) }"
  [ "${rest%% *}" != Z ]
}

# kill_leftovers [JVM_PID]: SIGTERM, then SIGKILL, whatever leftover_pids finds.
kill_leftovers() {
  local jvm="${1:-}" round sig pids p alive
  # A stale pid that now belongs to some other live process must not select its session.
  if [ -n "$jvm" ] && [ -d "/proc/$jvm" ] && [ "$(cluster_pid)" != "$jvm" ]; then
    jvm=""
  fi
  for round in 1 2 3; do
    pids="$(leftover_pids "$jvm" | sort -n | tr '\n' ' ')"
    [ -n "${pids// /}" ] || return 0
    sig=KILL
    [ "$round" = 1 ] && sig=TERM
    say "sending SIG$sig to leftover processes: $pids"
    # shellcheck disable=SC2086
    kill -"$sig" $pids 2>/dev/null || true
    for _ in $(seq 1 30); do
      alive=""
      for p in $pids; do
        if proc_alive "$p"; then
          alive=1
          break
        fi
      done
      [ -n "$alive" ] || break
      sleep 0.1
    done
  done
  pids="$(leftover_pids "$jvm" | tr '\n' ' ')"
  [ -z "${pids// /}" ] || die "processes still alive after SIGKILL: $pids"
}

# ---------------------------------------------------------------- commands

cmd_start() {
  local pid t_start=$SECONDS kerberos=false a
  local args=()
  for a in "$@"; do
    case "$a" in
      --kerberos) kerberos=true ;;
      --*) die "unknown option '$a' (start takes --kerberos and key=value overrides)" ;;
      *) args+=("$a") ;;
    esac
  done
  set -- ${args[@]+"${args[@]}"}
  if [ -z "$LOG_AGGREGATION" ]; then
    # With Kerberos the NodeManagers read container logs with Hadoop's SecureIOUtils, which needs
    # libhadoop (not in the Maven artifacts): aggregation would fail for every application.
    LOG_AGGREGATION=true
    [ "$kerberos" = false ] || LOG_AGGREGATION=false
  fi
  pid="$(cluster_pid)"
  if [ -n "$pid" ] && [ "$(pid_kerberos "$pid")" != "$kerberos" ]; then
    die "a cluster in $(mode_name "$(pid_kerberos "$pid")") mode is running (pid $pid); stop it before starting one in $(mode_name "$kerberos") mode"
  fi
  if [ -n "$pid" ] && is_ready "$pid"; then
    say "already running (pid $pid); $(status_line "$pid")"
    return 0
  fi
  ensure_built
  if [ -n "$pid" ]; then
    say "a cluster JVM (pid $pid) is already starting; waiting for it"
  else
    # A previous run may have died without `stop`: clean up its processes and data.
    kill_leftovers "$(cat "$PID_FILE" 2>/dev/null || true)"
    rm -f "$PID_FILE" "$READY_FILE"
    say "state dir $STATE_DIR (fresh data/ and conf/)"
    rm -rf "$DATA_DIR" "$CONF_DIR" "$KDC_DIR"
    mkdir -p "$DATA_DIR" "$CONF_DIR"
    [ -f "$LOG_FILE" ] && mv -f "$LOG_FILE" "$LOG_FILE.1"

    local jvm=(
      "$JAVA" -Xms256m "-Xmx$HEAP" -XX:+ExitOnOutOfMemoryError -XX:+IgnoreUnrecognizedVMOptions
      -Djava.net.preferIPv4Stack=true -Djava.awt.headless=true
      "${ADD_OPENS[@]}"
      "-Dlog4j.configuration=file:$SRC_DIR/src/main/resources/log4j-server.properties"
      "-Dtest.build.data=$DATA_DIR"
      "-Dspindle.minicluster.datanodes=$DATANODES"
      "-Dspindle.minicluster.nodemanagers=$NODEMANAGERS"
      "-Dspindle.minicluster.nm.memory.mb=$NM_MEMORY_MB"
      "-Dspindle.minicluster.nm.vcores=$NM_VCORES"
      "-Dspindle.minicluster.min.allocation.mb=$MIN_ALLOCATION_MB"
      "-Dspindle.minicluster.heartbeat.ms=$HEARTBEAT_MS"
      "-Dspindle.minicluster.log.aggregation=$LOG_AGGREGATION"
      "-Dspindle.minicluster.nm.web=$NM_WEB"
      "-Dspindle.minicluster.dir=$STATE_DIR"
    )
    local what="" cp="$CLASSES_DIR:$(cat "$CP_FILE")"
    if [ "$kerberos" = true ]; then
      jvm+=(-Dspindle.minicluster.kerberos=true)
      # The JVM's own core-site.xml, with the Kerberos settings, for the Configurations the
      # servers make from scratch (written by the launcher before the servers start). The
      # directory must exist before the JVM starts, or the JVM takes it for a missing jar.
      mkdir -p "$KDC_DIR/jvm-conf"
      cp="$KDC_DIR/jvm-conf:$cp"
      what=", Kerberos (a KDC first; files in $KDC_DIR)"
    fi
    jvm+=(-cp "$cp" "$MAIN_CLASS" "$@")
    say "starting the cluster JVM: Hadoop $HADOOP_VERSION, 1 NameNode + $DATANODES DataNode(s), 1 ResourceManager + $NODEMANAGERS NodeManager(s)$what, -Xmx$HEAP (log: $LOG_FILE)"
    # The JVM leads its own session (so the terminal's signals don't reach it); the pid file is
    # written by the shell that execs it. HADOOP_CONF_DIR is passed on to containers.
    (
      cd "$STATE_DIR"
      export HADOOP_CONF_DIR="$CONF_DIR" YARN_CONF_DIR="$CONF_DIR" JAVA_HOME
      exec setsid bash -c 'echo $$ >"$0"; exec "$@"' "$PID_FILE" "${jvm[@]}" </dev/null >"$LOG_FILE" 2>&1
    ) &
    for _ in $(seq 1 100); do
      [ -s "$PID_FILE" ] && break
      sleep 0.05
    done
    pid="$(cluster_pid)"
    [ -n "$pid" ] || { tail -n 40 "$LOG_FILE" >&2 2>/dev/null || true; die "the cluster JVM did not start"; }
  fi

  local t0=$SECONDS last_report=$SECONDS ready=0
  SHOWN=0
  while :; do
    is_ready "$pid" && ready=1
    if show_progress; then
      last_report=$SECONDS
    fi
    [ "$ready" = 0 ] || break
    if ! kill -0 "$pid" 2>/dev/null; then
      echo "----- last lines of $LOG_FILE -----" >&2
      tail -n 40 "$LOG_FILE" >&2 || true
      kill_leftovers "$pid"
      rm -f "$PID_FILE"
      die "the cluster JVM (pid $pid) exited during start-up; see $LOG_FILE"
    fi
    if [ $((SECONDS - t0)) -ge "$START_TIMEOUT" ]; then
      echo "----- last lines of $LOG_FILE -----" >&2
      tail -n 40 "$LOG_FILE" >&2 || true
      say "not ready after ${START_TIMEOUT}s; stopping it"
      stop_pid "$pid" 10
      die "the cluster did not become ready within ${START_TIMEOUT}s (SPINDLE_MINICLUSTER_START_TIMEOUT); see $LOG_FILE"
    fi
    if [ $((SECONDS - last_report)) -ge 10 ]; then
      say "still starting ($((SECONDS - t0))s)"
      last_report=$SECONDS
    fi
    sleep 0.2
  done
  say "ready after $((SECONDS - t_start))s: $(status_line "$pid")"
  say "use it with: eval \"\$(scripts/minicluster.sh env)\"   (HADOOP_CONF_DIR=$CONF_DIR)"
}

# show_progress: echo the launcher's new "[spindle-minicluster]" log lines; true if there were any.
show_progress() {
  local lines
  [ -f "$LOG_FILE" ] || return 1
  lines="$(grep -c '^\[spindle-minicluster\]' "$LOG_FILE" 2>/dev/null || true)"
  [ "${lines:-0}" -gt "$SHOWN" ] || return 1
  grep '^\[spindle-minicluster\]' "$LOG_FILE" | sed -n "$((SHOWN + 1)),${lines}p" \
    | sed 's/^\[spindle-minicluster\] /minicluster: jvm: /' >&2
  SHOWN="$lines"
}

status_line() {
  local pid="$1"
  echo "running (pid $pid): HDFS $(ready_value fs_default_fs), YARN RM $(ready_value rm_address)" \
       "(scheduler $(ready_value rm_scheduler_address), web http://$(ready_value rm_webapp_address))," \
       "$(ready_value nodemanager_count) NodeManager(s);$(kerberos_status) HADOOP_CONF_DIR=$CONF_DIR"
}

kerberos_status() {
  [ "$(ready_value kerberos)" = true ] || return 0
  echo " Kerberos realm $(ready_value kerberos_realm) (KDC $(ready_value kdc_address), krb5.conf $(ready_value krb5_conf));"
}

# stop_pid PID TIMEOUT: SIGTERM (the JVM's shutdown hook stops YARN, then HDFS), SIGKILL after TIMEOUT.
stop_pid() {
  local pid="$1" timeout="$2" t0=$SECONDS
  kill -TERM "$pid" 2>/dev/null || true
  while kill -0 "$pid" 2>/dev/null; do
    if [ $((SECONDS - t0)) -ge "$timeout" ]; then
      say "pid $pid still alive after ${timeout}s; sending SIGKILL"
      kill -KILL "$pid" 2>/dev/null || true
      sleep 0.5
      break
    fi
    sleep 0.2
  done
  # Anything else in the JVM's process group (it is a session leader) and the containers.
  kill -KILL -- "-$pid" 2>/dev/null || true
  kill_leftovers "$pid"
}

cmd_stop() {
  local pid t0=$SECONDS
  pid="$(cluster_pid)"
  if [ -n "$pid" ]; then
    say "stopping the cluster (pid $pid): YARN, then HDFS"
    stop_pid "$pid" "$STOP_TIMEOUT"
    say "stopped in $((SECONDS - t0))s"
  elif [ -f "$PID_FILE" ]; then
    say "not running (stale pid file: pid $(cat "$PID_FILE" 2>/dev/null) is gone); cleaning up after it"
    kill_leftovers "$(cat "$PID_FILE" 2>/dev/null || true)"
  else
    say "not running"
    kill_leftovers ""
  fi
  rm -f "$PID_FILE" "$READY_FILE"
}

cmd_status() {
  local pid
  pid="$(cluster_pid)"
  if [ -z "$pid" ]; then
    echo "not running"
    return 3
  fi
  if ! is_ready "$pid"; then
    echo "not ready (pid $pid is starting or stopping)"
    return 2
  fi
  local a
  for a in "$(ready_value namenode_rpc_address)" "$(ready_value rm_address)" "$(ready_value rm_scheduler_address)" \
           $(ready_value kdc_address); do
    if ! tcp_open "$a"; then
      echo "unhealthy (pid $pid): nothing listens on $a"
      return 1
    fi
  done
  status_line "$pid"
}

shell_quote() { printf "'%s'" "$(printf '%s' "$1" | sed "s/'/'\\\\''/g")"; }

cmd_env() {
  local pid user
  pid="$(cluster_pid)"
  user="${HADOOP_USER_NAME:-$(id -un)}"
  echo "export SPINDLE_MINICLUSTER_DIR=$(shell_quote "$STATE_DIR")"
  echo "export HADOOP_CONF_DIR=$(shell_quote "$CONF_DIR")"
  echo "export YARN_CONF_DIR=$(shell_quote "$CONF_DIR")"
  echo "export HADOOP_USER_NAME=$(shell_quote "$user")"
  if [ -n "$pid" ] && is_ready "$pid"; then
    echo "export SPINDLE_MINICLUSTER_FS=$(shell_quote "$(ready_value fs_default_fs)")"
    echo "export SPINDLE_MINICLUSTER_RM=$(shell_quote "$(ready_value rm_address)")"
    echo "export SPINDLE_MINICLUSTER_RM_SCHEDULER=$(shell_quote "$(ready_value rm_scheduler_address)")"
    # The ResourceManager's web server: its UI, REST API and the applications' web proxy (/proxy/).
    echo "export SPINDLE_MINICLUSTER_RM_WEB=$(shell_quote "$(ready_value rm_webapp_address)")"
  else
    say "warning: the cluster is not running; start it with scripts/minicluster.sh start"
  fi
  if [ -n "$pid" ] && is_ready "$pid" && [ "$(ready_value kerberos)" = true ]; then
    echo "export SPINDLE_MINICLUSTER_KERBEROS=1"
    echo "export SPINDLE_MINICLUSTER_REALM=$(shell_quote "$(ready_value kerberos_realm)")"
    echo "export SPINDLE_MINICLUSTER_KDC=$(shell_quote "$(ready_value kdc_address)")"
    echo "export KRB5_CONFIG=$(shell_quote "$(ready_value krb5_conf)")"
    echo "export KRB5CCNAME=$(shell_quote "FILE:$(ready_value kerberos_ccache)")"
    echo "export SPINDLE_MINICLUSTER_PRINCIPAL=$(shell_quote "$(ready_value kerberos_principal)")"
    echo "export SPINDLE_MINICLUSTER_KEYTAB=$(shell_quote "$(ready_value kerberos_keytab)")"
    echo "export SPINDLE_MINICLUSTER_WRONG_KEYTAB=$(shell_quote "$(ready_value kerberos_wrong_keytab)")"
    echo "export SPINDLE_MINICLUSTER_EXPIRED_CCACHE=$(shell_quote "$(ready_value kerberos_expired_ccache)")"
  else
    # Not in Kerberos mode: drop what an earlier Kerberos run's env exported, and KRB5_CONFIG and
    # KRB5CCNAME only when they point into this state dir (they may be the user's own).
    echo "unset SPINDLE_MINICLUSTER_KERBEROS SPINDLE_MINICLUSTER_REALM SPINDLE_MINICLUSTER_KDC" \
         "SPINDLE_MINICLUSTER_PRINCIPAL SPINDLE_MINICLUSTER_KEYTAB SPINDLE_MINICLUSTER_WRONG_KEYTAB" \
         "SPINDLE_MINICLUSTER_EXPIRED_CCACHE"
    local kdc
    kdc="$(shell_quote "$KDC_DIR/")"
    echo "case \"\${KRB5_CONFIG:-}\" in $kdc*) unset KRB5_CONFIG ;; esac"
    echo "case \"\${KRB5CCNAME:-}\" in $kdc*|FILE:$kdc*) unset KRB5CCNAME ;; esac"
  fi
}

require_ready() {
  local pid
  pid="$(cluster_pid)"
  [ -n "$pid" ] && is_ready "$pid" || die "the mini cluster is not running; start it with scripts/minicluster.sh start"
  ensure_built
}

# run_client CLASS ARGS...: a short-lived client JVM with the cluster's conf dir first on the classpath.
run_client() {
  local cls="$1" level="${CLIENT_LOG_LEVEL:-${SPINDLE_MINICLUSTER_CLIENT_LOG_LEVEL:-WARN}}"
  shift
  export HADOOP_CONF_DIR="$CONF_DIR" YARN_CONF_DIR="$CONF_DIR"
  export HADOOP_USER_NAME="${HADOOP_USER_NAME:-$(id -un)}"
  local krb=()
  if [ "$(ready_value kerberos)" = true ]; then
    # Hadoop logs in from the ticket cache KRB5CCNAME names (FILE:path or path), alice's by default.
    krb=("-Djava.security.krb5.conf=$(ready_value krb5_conf)")
    export KRB5CCNAME="${KRB5CCNAME:-FILE:$(ready_value kerberos_ccache)}"
  fi
  exec "$JAVA" "-Xmx$CLIENT_HEAP" -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -XX:+IgnoreUnrecognizedVMOptions \
    -Djava.net.preferIPv4Stack=true -Djava.awt.headless=true "${ADD_OPENS[@]}" ${krb[@]+"${krb[@]}"} \
    "-Dlog4j.configuration=file:$SRC_DIR/src/main/resources/log4j-client.properties" \
    "-Dspindle.client.log.level=$level" \
    -cp "$CONF_DIR:$(cat "$CP_FILE")" "$cls" "$@"
}

cmd_hdfs() {
  require_ready
  local sub="${1:-dfs}"
  case "$sub" in
    dfs) shift || true; run_client org.apache.hadoop.fs.FsShell "$@" ;;
    dfsadmin) shift; run_client org.apache.hadoop.hdfs.tools.DFSAdmin "$@" ;;
    fsck) shift; run_client org.apache.hadoop.hdfs.tools.DFSck "$@" ;;
    getconf) shift; run_client org.apache.hadoop.hdfs.tools.GetConf "$@" ;;
    -*) run_client org.apache.hadoop.fs.FsShell "$@" ;;
    *) die "unknown hdfs subcommand '$sub' (use: dfs, dfsadmin, fsck, getconf)" ;;
  esac
}

cmd_yarn() {
  require_ready
  local sub="${1:-}"
  [ -n "$sub" ] || die "usage: scripts/minicluster.sh yarn application|node|logs|queue|cluster|rmadmin|... ARGS"
  shift
  case "$sub" in
    application|app|applicationattempt|container)
      # ApplicationCLI takes the subcommand name as its first argument (as bin/yarn passes it).
      run_client org.apache.hadoop.yarn.client.cli.ApplicationCLI "$sub" "$@" ;;
    node) run_client org.apache.hadoop.yarn.client.cli.NodeCLI "$@" ;;
    logs) run_client org.apache.hadoop.yarn.client.cli.LogsCLI "$@" ;;
    queue) run_client org.apache.hadoop.yarn.client.cli.QueueCLI "$@" ;;
    cluster) run_client org.apache.hadoop.yarn.client.cli.ClusterCLI "$@" ;;
    rmadmin) run_client org.apache.hadoop.yarn.client.cli.RMAdminCLI "$@" ;;
    top) run_client org.apache.hadoop.yarn.client.cli.TopCLI "$@" ;;
    nodeattributes) run_client org.apache.hadoop.yarn.client.cli.NodeAttributesCLI "$@" ;;
    schedulerconf) run_client org.apache.hadoop.yarn.client.cli.SchedConfCLI "$@" ;;
    version) run_client org.apache.hadoop.util.VersionInfo "$@" ;;
    *) die "unknown yarn subcommand '$sub' (use: application, applicationattempt, container, node, logs, queue, cluster, rmadmin, top, nodeattributes, schedulerconf, version)" ;;
  esac
}

cmd_dshell() {
  require_ready
  local jar a
  jar="$(tr ':' '\n' <"$CP_FILE" | grep '/hadoop-yarn-applications-distributedshell-[^/]*\.jar$' || true)"
  jar="${jar%%$'\n'*}"
  [ -n "$jar" ] || die "the DistributedShell jar is not on the classpath ($CP_FILE)"
  for a in "$@"; do
    if [ "$a" = "-jar" ]; then
      CLIENT_LOG_LEVEL="${SPINDLE_MINICLUSTER_CLIENT_LOG_LEVEL:-INFO}" \
        run_client org.apache.hadoop.yarn.applications.distributedshell.Client "$@"
    fi
  done
  CLIENT_LOG_LEVEL="${SPINDLE_MINICLUSTER_CLIENT_LOG_LEVEL:-INFO}" \
    run_client org.apache.hadoop.yarn.applications.distributedshell.Client -jar "$jar" "$@"
}

usage() {
  sed -n '2,18p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
  exit 2
}

main() {
  local cmd="${1:-}"
  [ -n "$cmd" ] || usage
  shift
  state_dir_init
  case "$cmd" in
    start) cmd_start "$@" ;;
    stop) cmd_stop ;;
    restart) cmd_stop; cmd_start "$@" ;;
    status) cmd_status ;;
    env) cmd_env ;;
    hdfs) cmd_hdfs "$@" ;;
    yarn) cmd_yarn "$@" ;;
    dshell) cmd_dshell "$@" ;;
    build) ensure_built; say "built: $CLASSES_DIR, classpath $CP_FILE" ;;
    classpath) ensure_built; echo "$CONF_DIR:$(cat "$CP_FILE")" ;;
    -h|--help|help) usage ;;
    *) say "unknown command '$cmd'"; usage ;;
  esac
}

main "$@"
