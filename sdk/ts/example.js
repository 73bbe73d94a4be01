// The TypeScript SDK in use, and the e2e suite's proof of it: list the
// node's apps, watch until the app changes, and upgrade it.
//
//   node sdk/ts/example.js list    ADDRESS
//   node sdk/ts/example.js watch   ADDRESS NAMESPACE/DAEMONSET PHASE [IMAGE]
//                                  (until the app shows PHASE, and IMAGE among its images)
//   node sdk/ts/example.js upgrade ADDRESS NAMESPACE/DAEMONSET
//
// ADDRESS is the agent's host:port (plaintext gRPC over HTTP/2). Each command
// prints JSON lines (the agent's REST JSON: camelCase, enums by full name).
import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { toJson } from "@bufbuild/protobuf";
import { OTAService } from "./gen/edgeota/v1/ota_pb.js";
import { UpgradePhase, WatchUpgradesResponseSchema, ListUpgradesResponseSchema } from "./gen/edgeota/v1/upgrades_pb.js";

const [command, address, app, phase, image] = process.argv.slice(2);
const client = createClient(OTAService, createGrpcTransport({ baseUrl: `http://${address}` }));

function split(ref) {
  const [namespace, daemonSet] = (ref ?? "").split("/");
  if (!namespace || !daemonSet) throw new Error(`want NAMESPACE/DAEMONSET, got ${ref}`);
  return { namespace, daemonSet };
}

async function main() {
  switch (command) {
    case "list": {
      const resp = await client.listUpgrades({});
      console.log(JSON.stringify(toJson(ListUpgradesResponseSchema, resp)));
      return;
    }
    case "watch": {
      const { namespace, daemonSet } = split(app);
      const want = UpgradePhase[phase]; // protoc-gen-es drops the enum prefix
      if (want === undefined) throw new Error(`unknown phase ${phase}`);
      for await (const m of client.watchUpgrades({})) {
        console.log(JSON.stringify(toJson(WatchUpgradesResponseSchema, m)));
        const apps = m.app ? [m.app] : m.apps;
        const shows = (a) =>
          a.namespace === namespace && a.daemonSet === daemonSet && a.phase === want &&
          (!image || [...Object.values(a.currentImages), ...Object.values(a.targetImages)].includes(image));
        if (apps.some(shows)) return;
      }
      throw new Error("the watch ended");
    }
    case "upgrade": {
      const { namespace, daemonSet } = split(app);
      const list = await client.listUpgrades({});
      const found = list.apps.find((a) => a.namespace === namespace && a.daemonSet === daemonSet);
      if (!found) throw new Error(`no app ${namespace}/${daemonSet}`);
      const resp = await client.upgrade({ namespace, name: found.pod });
      console.log(JSON.stringify({ message: resp.message, queued: resp.queued }));
      return;
    }
    default:
      throw new Error(`unknown command ${command}: list, watch or upgrade`);
  }
}

// The transport keeps its HTTP/2 session open: exit when done.
main().then(
  () => process.exit(0),
  (err) => {
    console.error(err.message ?? err);
    process.exit(1);
  },
);
