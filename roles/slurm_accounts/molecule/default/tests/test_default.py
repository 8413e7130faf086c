"""slurm_accounts on the Molecule container: sacctmgr holds exactly the tenants of the inventory."""


def assocs(host):
    out = host.check_output(
        "sacctmgr --noheader --parsable2 show assoc where cluster=mol format=Account,User,Fairshare,GrpTRES,QOS,DefaultQOS"
    )
    return {(row[0], row[1]): row[2:] for row in (line.split("|") for line in out.splitlines())}


def test_tenant_accounts_have_fairshare_limits_and_qos(host):
    rows = assocs(host)
    # Fairshare is the tenant's Slurm GPU quota (1 where it is 0), not the inventory's fairshare.
    assert rows[("team-a", "")] == ["2", "gres/gpu=2", "capped,normal", "normal"]
    assert rows[("team-b", "")] == ["1", "gres/gpu=2", "normal", ""]  # no default_qos in the inventory


def test_users_belong_to_their_tenant(host):
    rows = assocs(host)
    assert ("team-a", "alice") in rows and ("team-b", "bob") in rows
    assert ("team-b", "alice") not in rows


def test_qos_carries_the_gpu_limit(host):
    out = host.check_output("sacctmgr --noheader --parsable2 show qos format=Name,MaxTRESPU")
    assert "capped|gres/gpu=1" in out.splitlines()


def test_sshare_shows_the_tenant_shares(host):
    out = host.check_output("sshare --noheader --parsable2 --format=Account,User,RawShares")
    shares = {a.strip(): raw for a, u, raw in (line.split("|") for line in out.splitlines()) if not u}
    assert shares["team-a"] == "2" and shares["team-b"] == "1"
