#!/usr/bin/env bash
# Runs inside `unshare --mount --uts --net --pid --fork`: a private copy of /etc/slurm, /etc/hosts,
# munge, MariaDB and slurmdbd, then slurmctld loading the generated files. Nothing here is visible
# outside the namespaces; everything dies with this script.
set -euo pipefail
work=$1        # scratch dir (outside view), holds conf/ and receives results in out/
host=$2        # controller hostname the config expects
seconds=$3     # how long slurmctld runs before we read its state
accounting=$4  # "yes" when slurm.conf configures slurmdbd
daemon_user=${5:-root}  # who runs slurmctld and slurmdbd: the packages' units run them as slurm from trixie on
dbd_apart=${6:-no}      # "yes": slurmdbd's host is not the primary controller (it runs in the peer namespace)
slurm_user=${7:-slurm}  # SlurmUser: owns the state and logs (a site's user is made here when the image lacks it)
programs_mode=${8:-install}  # how the programs slurm.conf names are put in place: "install" (a throwaway
                             # container's filesystem) or "overlay" (the host's: a private copy of each
                             # program's directory, bind-mounted over it in this mount namespace only)
as_daemon_user() { if [ "$daemon_user" = root ]; then "$@"; else runuser -u "$daemon_user" -- "$@"; fi; }
# slurmdbd's host: the peer namespace when it is not the primary controller.
as_dbd() {
  local where=()
  [ "$dbd_apart" = yes ] && where=(ip netns exec gpctrialpeer)
  if [ "$daemon_user" = root ]; then "${where[@]}" "$@"; else "${where[@]}" runuser -u "$daemon_user" -- "$@"; fi
}

mount --make-rprivate /
hostname "$host"
ip link set lo up
# getaddrinfo(AI_ADDRCONFIG) ignores loopback: the daemons resolve nothing unless some other
# interface has an address. A veth pair living only inside this namespace provides one; all
# traffic still goes to 127.0.0.1 (see the hosts file).
ip link add gpctrial0 type veth peer name gpctrial1
ip addr add 10.223.0.1/30 dev gpctrial0
ip link set gpctrial0 up
mkdir -p "$work/out"

# Private views of the paths Debian's Slurm, munge and MariaDB use.
mount -t tmpfs tmpfs /run
# The other end of the veth in a namespace of its own, 10.223.0.2: the backup controllers' and a
# separate slurmdbd host's address (see the hosts file). No slurmctld listens there, so the
# primary's start-up notice to its backups is refused at once; slurmdbd, when it has a host of its
# own, runs there.
ip netns add gpctrialpeer
ip link set gpctrial1 netns gpctrialpeer
ip -n gpctrialpeer addr add 10.223.0.2/30 dev gpctrial1
ip -n gpctrialpeer link set gpctrial1 up
ip -n gpctrialpeer link set lo up
# The addresses hosts.yml gives the daemons (NodeAddr, SlurmctldHost=name(address), ...), on the
# loopback device of the namespace their host is in: nothing outside the sandbox is reached.
if [ -s "$work/addresses" ]; then
  while read -r where address; do
    if [ "$where" = peer ]; then ip -n gpctrialpeer addr add "$address/32" dev lo; else ip addr add "$address/32" dev lo; fi
  done <"$work/addresses"
fi
# SlurmUser must exist (the roles require it on every host): a site's user the image lacks is
# added to private copies of passwd and group, never to the real ones.
if ! id "$slurm_user" >/dev/null 2>&1; then
  cp /etc/passwd "$work/passwd" && cp /etc/group "$work/group"
  echo "$slurm_user:x:64999:" >>"$work/group"
  echo "$slurm_user:x:64999:64999:SlurmUser of the trial:/nonexistent:/usr/sbin/nologin" >>"$work/passwd"
  mount --bind "$work/passwd" /etc/passwd
  mount --bind "$work/group" /etc/group
fi
mount --bind "$work/conf" /etc/slurm
mount --bind "$work/hosts" /etc/hosts
for dir in /var/lib/slurm /var/log/slurm /run/munge /etc/munge /var/lib/mysql /run/mysqld /var/log/munge /var/lib/munge; do
  mkdir -p "$dir"
  mount -t tmpfs tmpfs "$dir"
done
mkdir -p /var/lib/slurm/slurmctld /var/lib/slurm/slurmd
# The directories systemd makes for the daemons' pid files (RuntimeDirectory) where the packages
# run them as slurm (Debian trixie and later).
for pidfile in "$(sed -n 's/^SlurmctldPidFile=//p' /etc/slurm/slurm.conf)" \
    "$(sed -n 's/^PidFile=//p' /etc/slurm/slurmdbd.conf 2>/dev/null)"; do
  dir=$(dirname "$pidfile")
  if [ -n "$pidfile" ] && [ "$dir" != /run ]; then mkdir -p "$dir" && chown "$slurm_user:" "$dir"; fi
done
# A throwaway JWT key where slurm.conf names one (the REST API; the path is in the private tmpfs).
jwt_key=$(sed -n 's/^AuthAltParameters=.*jwt_key=\([^,]*\).*/\1/p' /etc/slurm/slurm.conf)
if [ -n "$jwt_key" ]; then
  (umask 0177; head -c 32 /dev/urandom >"$jwt_key")
fi
chown -R "$slurm_user:" /var/lib/slurm /var/log/slurm
[ -f /etc/slurm/slurmdbd.conf ] && chown "$slurm_user:" /etc/slurm/slurmdbd.conf
chown munge:munge /run/munge /etc/munge /var/log/munge /var/lib/munge
chmod 0700 /etc/munge

mungekey --create --keyfile /etc/munge/munge.key >/dev/null 2>&1
chown munge:munge /etc/munge/munge.key
chmod 0400 /etc/munge/munge.key
runuser -u munge -- /usr/sbin/munged

if [ "$accounting" = yes ]; then
  chown mysql:mysql /var/lib/mysql /run/mysqld
  mariadb-install-db --user=mysql --datadir=/var/lib/mysql --skip-test-db --auth-root-authentication-method=socket >"$work/out/mariadb-install.log" 2>&1
  runuser -u mysql -- /usr/sbin/mariadbd --datadir=/var/lib/mysql --socket=/run/mysqld/mysqld.sock \
    --skip-networking --pid-file=/run/mysqld/mysqld.pid --log-error=/var/lib/mysql/error.log \
    --innodb-buffer-pool-size=4G --innodb-lock-wait-timeout=900 --loose-innodb-snapshot-isolation=OFF &
  for _ in $(seq 100); do [ -S /run/mysqld/mysqld.sock ] && break; sleep 0.1; done
  # The database exists before slurmdbd connects, as the slurm_dbd role makes it: 26.05's slurmdbd
  # with MariaDB 11.8 fails its first query when it has to create it itself ("Number of columns in
  # result (=1) ... exceeds ... (=0)").
  mariadb -e "CREATE DATABASE IF NOT EXISTS slurm_acct_db; CREATE USER IF NOT EXISTS '$slurm_user'@'localhost' IDENTIFIED VIA unix_socket; GRANT ALL ON slurm_acct_db.* TO '$slurm_user'@'localhost';"
  as_dbd /usr/sbin/slurmdbd -D >"$work/out/slurmdbd.log" 2>&1 &
  dbd=$!
  for _ in $(seq 50); do
    kill -0 "$dbd" 2>/dev/null || break
    timeout 5 sacctmgr -n -P show cluster >/dev/null 2>&1 && break
    sleep 0.2
  done
  cluster=$(sed -n 's/^ClusterName=//p' /etc/slurm/slurm.conf)
  # sacctmgr parses slurm.conf too: a broken file fails here first, and slurmctld says why below.
  timeout 20 sacctmgr -i add cluster "$cluster" >"$work/out/sacctmgr.log" 2>&1 || true
fi
# The inventory's QOS, accounts and users, as the slurm_accounts role adds them: once slurmctld has
# registered, since slurmdbd knows a TRES such as gres/gpu only from slurmctld's AccountingStorageTRES.
seed_accounts() {
  [ "$accounting" = yes ] && [ -s "$work/sacctmgr.commands" ] || return 0
  while IFS= read -r line; do
    eval "words=($line)"
    [ "${words[0]} ${words[1]}" = "add cluster" ] && continue
    timeout 20 sacctmgr -i "${words[@]}" >>"$work/out/sacctmgr.log" 2>&1 || true
  done <"$work/sacctmgr.commands"
}

# The programs slurm.conf names (gpucluster's own, or a stand-in that only logs for a site's).
if [ -s "$work/programs.list" ]; then
  while IFS=$'\t' read -r path file whose key; do
    dir=$(dirname "$path")
    # A site's program this machine has (e.g. MailProg=/usr/bin/true) stays as it is.
    if [ "$whose" = site ] && [ -x "$path" ]; then continue; fi
    if [ "$programs_mode" = overlay ]; then
      if [ ! -d "$dir" ]; then
        echo "missing $key=$path not provided: $dir does not exist on this host" >>"$work/out/programs.log"
        continue
      fi
      if [ ! -e "$work/overlay$dir/.gpucluster-trial" ]; then
        mkdir -p "$work/overlay$dir"
        cp -a "$dir/." "$work/overlay$dir/" 2>/dev/null || true
        touch "$work/overlay$dir/.gpucluster-trial"
        mount --bind "$work/overlay$dir" "$dir"
      fi
    fi
    install -D -m 0755 "$work/programs/$file" "$path"
    if [ "$whose" = site ]; then echo "stand-in $key $path" >>"$work/out/programs.log"; fi
  done <"$work/programs.list"
fi

# slurmctld is up (or has exited, or the deadline passed): bounded whatever it does.
wait_for_ctld() {
  local deadline=$((SECONDS + 90))
  for _ in $(seq $((seconds * 10))); do
    kill -0 "$ctld" 2>/dev/null || break
    [ "$SECONDS" -lt "$deadline" ] || break
    # A ping killed mid-RPC would itself make slurmctld log an error: give it time to answer.
    timeout 30 scontrol ping 2>/dev/null | grep -q '(primary) at .* is UP' && break
    sleep 0.1
  done
}
if [ "$accounting" = yes ] && [ -s "$work/sacctmgr.commands" ] && grep -qv '^add cluster ' "$work/sacctmgr.commands"; then
  # A first start registers the cluster's TRES with slurmdbd; the associations are added then, as
  # the slurm_accounts role adds them to a running cluster, and the verdict is the second start's.
  as_daemon_user /usr/sbin/slurmctld -D -c >"$work/out/slurmctld.first.stderr" 2>&1 &
  ctld=$!
  wait_for_ctld
  seed_accounts
  kill "$ctld" 2>/dev/null || true
  wait "$ctld" 2>/dev/null || true
  rm -f /var/log/slurm/slurmctld.log
fi
as_daemon_user /usr/sbin/slurmctld -D -c -v >"$work/out/slurmctld.stderr" 2>&1 &
ctld=$!
# A controller that never answers is reported, not waited for.
wait_for_ctld
sleep "$seconds"
if kill -0 "$ctld" 2>/dev/null; then
  echo running >"$work/out/state"
  # Everything logged so far is the daemon's verdict on the files; shutdown noise comes later.
  cp /var/log/slurm/slurmctld.log "$work/out/slurmctld.startup.log" 2>/dev/null || true
  timeout 10 scontrol show topology >"$work/out/topology" 2>&1 || true
  # topology.yaml (25.05+) may define several topologies; `show topology` lists the default one.
  if [ -f /etc/slurm/topology.yaml ]; then
    for name in $(sed -n 's/^- topology: *"\{0,1\}\([^"]*\)"\{0,1\} *$/\1/p' /etc/slurm/topology.yaml); do
      timeout 10 scontrol show topology "$name" >"$work/out/topology.$name" 2>&1 || true
    done
  fi
  timeout 10 scontrol show partition -o >"$work/out/partitions" 2>&1 || true
  timeout 10 scontrol show node -o >"$work/out/nodes" 2>&1 || true
  kill "$ctld"
  wait "$ctld" || true
else
  echo exited >"$work/out/state"
  cp "$work/out/slurmctld.stderr" "$work/out/slurmctld.startup.log"
fi
cp /var/log/slurm/slurmctld.log "$work/out/slurmctld.log" 2>/dev/null || true
cp /var/lib/mysql/error.log "$work/out/mariadb.log" 2>/dev/null || true
