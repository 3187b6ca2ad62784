"""deploy/k8s (ctest): the Kubernetes manifests, on paper (nothing is applied:
no cluster here), checked for what would break them on one:

- every file parses as YAML, every object is in namespace deskgate;
- the names between them: the StatefulSet's serviceName is the headless
  Service (publishing not-ready pods), the ConfigMaps and Secrets its pods
  mount exist or are the documented three, the balancer mounts
  deskgate-haproxy where the rendered configuration expects its errorfile,
  and the LoadBalancer targets the balancer's port;
- the gateway's config.json: JSON, an object_store whose store file is the
  one the init container installs (0600) on a volume the gateway mounts, the
  shared recording key installed into the state directory, the ports the
  container and HAProxy use, the instance from the pod's name;
- haproxy.yaml is exactly deploy/k8s/haproxy-configmap.py's output for the
  StatefulSet's replicas and limits.max_sessions, and HAProxy accepts its
  haproxy.cfg (haproxy -c, its paths moved to a temporary directory).

    python3 k8s.py
"""
import importlib.util
import json
import os
import subprocess
import sys
import tempfile

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
K8S = os.path.join(ROOT, "deploy", "k8s")
# Imported from deploy/: no __pycache__ left in the source tree.
sys.dont_write_bytecode = True
_spec = importlib.util.spec_from_file_location("configmap", os.path.join(K8S, "haproxy-configmap.py"))
configmap = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(configmap)

SECRETS = {"deskgate-tokens", "deskgate-store", "deskgate-recording-key"}
STATE_DIR = "/var/lib/deskgate"  # the gateway's default state_dir
INSTANCE_MAX = 32

failures = []


def check(what, ok, detail=""):
    print(("ok   " if ok else "FAIL ") + what + (f": {detail}" if detail and not ok else ""),
          flush=True)
    if not ok:
        failures.append(what)
    return ok


def objects():
    out = {}
    for name in sorted(os.listdir(K8S)):
        if name.endswith(".yaml"):
            with open(os.path.join(K8S, name)) as f:
                try:
                    docs = [d for d in yaml.safe_load_all(f) if d]
                except yaml.YAMLError as e:
                    check(f"{name} parses as YAML", False, e)
                    continue
            check(f"{name} parses as YAML", True)
            for d in docs:
                out[(d["kind"], d["metadata"]["name"])] = d
                check(f"{name}: {d['kind']} {d['metadata']['name']} is in namespace deskgate",
                      d["metadata"].get("namespace") == "deskgate")
    return out


def main():
    o = objects()
    sts = o[("StatefulSet", "deskgate")]
    pod = sts["spec"]["template"]["spec"]
    gw = next(c for c in pod["containers"] if c["name"] == "deskgate")
    mounts = {m["name"]: m["mountPath"] for m in gw["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    hosts = o.get(("Service", sts["spec"]["serviceName"]), {})
    check("the StatefulSet's serviceName is a headless Service of its pods, not-ready ones too",
          hosts.get("spec", {}).get("clusterIP") == "None" and
          hosts["spec"].get("publishNotReadyAddresses") is True and
          hosts["spec"]["selector"] == sts["spec"]["template"]["metadata"]["labels"], hosts)
    replicas = sts["spec"]["replicas"]
    check("its pods' names are instances (at most 32 of [a-z0-9-])",
          len(f"{sts['metadata']['name']}-{replicas - 1}") <= INSTANCE_MAX)
    env = {e["name"]: e for e in gw["env"]}
    check("DESKGATE_INSTANCE is the pod's name",
          env["DESKGATE_INSTANCE"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name")
    secrets = {v["secret"]["secretName"] for v in volumes.values() if "secret" in v}
    secrets |= {e["valueFrom"]["secretKeyRef"]["name"] for e in env.values()
                if "secretKeyRef" in e.get("valueFrom", {})}
    check("the Secrets the pods use are the three documented", secrets == SECRETS, secrets)
    cm = o[("ConfigMap", volumes["config"]["configMap"]["name"])]
    cfg = json.loads(cm["data"]["config.json"])
    ports = {p["name"]: p["containerPort"] for p in gw["ports"]}
    check("config.json listens on the container's port and the agent-check's",
          cfg["listen"].endswith(f":{ports['http']}") and
          cfg["capacity"]["agent_check"].endswith(f":{ports['agent-check']}") and
          (ports["http"], ports["agent-check"]) == (configmap.PORT, configmap.AGENT_PORT), cfg)
    inits = {c["name"]: c for c in pod["initContainers"]}
    store = cfg.get("object_store", {}).get("store", "")
    installs = {c["command"][-1]: c for c in inits.values()
                if c["command"][:3] == ["install", "-m", "0600"]}
    check("object_store's store file is installed 0600 by an init container, on a volume the "
          "gateway mounts", store in installs and any(
              m["mountPath"] == os.path.dirname(store) and mounts.get(m["name"]) ==
              os.path.dirname(store) for m in installs[store]["volumeMounts"]),
          (store, sorted(installs)))
    check("with keep_local false", cfg["object_store"].get("keep_local") is False, cfg)
    key = f"{STATE_DIR}/recording-key.pem"
    check("the shared recording key is installed 0600 into the state directory",
          key in installs and mounts.get("state") == STATE_DIR and
          any(m["name"] == "state" for m in installs[key]["volumeMounts"]) and
          "state_dir" not in cfg, sorted(installs))
    check("the state volume is per pod (a claim template)",
          [t["metadata"]["name"] for t in sts["spec"]["volumeClaimTemplates"]] == ["state"])

    # The balancer.
    dep = o[("Deployment", "deskgate-balancer")]
    bal = dep["spec"]["template"]["spec"]
    hp = bal["containers"][0]
    cfg_vol = {v["name"]: v for v in bal["volumes"]}[hp["volumeMounts"][0]["name"]]
    check("the balancer mounts deskgate-haproxy where its configuration expects it",
          cfg_vol["configMap"]["name"] == "deskgate-haproxy" and
          hp["volumeMounts"][0]["mountPath"] == configmap.CFG_DIR)
    lb = o[("Service", "deskgate")]
    check("the LoadBalancer targets the balancer's port",
          lb["spec"]["selector"] == dep["spec"]["template"]["metadata"]["labels"] and
          lb["spec"]["ports"][0]["targetPort"] == hp["ports"][0]["containerPort"] ==
          int(configmap.BIND.rsplit(":", 1)[1]))
    with open(os.path.join(K8S, "haproxy.yaml")) as f:
        committed = f.read()
    max_sessions = cfg["limits"]["max_sessions"]
    check(f"haproxy.yaml is haproxy-configmap.py {replicas} {max_sessions}'s output",
          committed == configmap.render(replicas, max_sessions),
          f"run: python3 deploy/k8s/haproxy-configmap.py {replicas} {max_sessions} > "
          "deploy/k8s/haproxy.yaml")
    data = o[("ConfigMap", "deskgate-haproxy")]["data"]
    with tempfile.TemporaryDirectory(prefix="dg-k8s-") as tmp:
        with open(os.path.join(tmp, "no-host.http"), "w", newline="") as f:
            f.write(data["no-host.http"])
        with open(os.path.join(tmp, "haproxy.cfg"), "w") as f:
            f.write(data["haproxy.cfg"].replace(configmap.CFG_DIR, tmp)
                    .replace(configmap.SOCKET, os.path.join(tmp, "admin.sock")))
        r = subprocess.run(["haproxy", "-c", "-q", "-f", os.path.join(tmp, "haproxy.cfg")],
                           capture_output=True, text=True)
    check("haproxy -c accepts the ConfigMap's haproxy.cfg", r.returncode == 0, r.stderr[-2000:])
    servers = [ln.split()[1] for ln in data["haproxy.cfg"].splitlines()
               if ln.strip().startswith("server ")]
    want = [f"{sts['metadata']['name']}-{i}" for i in range(replicas)]
    check("one placement server and one host backend per pod", servers == want + want, servers)
    print(f"deploy/k8s: {len(failures)} failure(s)", flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
