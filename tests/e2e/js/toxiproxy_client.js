// Drives sluice's Toxiproxy API with the real toxiproxy-node-client, one step per run:
//   node toxiproxy_client.js API_URL STEP [ARGS...]
// and prints the step's result as one JSON line. The Rust test runs each step between
// its own Redis round trips.
"use strict";

const { Toxiproxy } = require("toxiproxy-node-client");

async function main() {
    const [url, step, ...args] = process.argv.slice(2);
    const toxiproxy = new Toxiproxy(url);
    switch (step) {
        case "version":
            return { version: await toxiproxy.getVersion() };
        case "create": {
            const [name, listen, upstream] = args;
            const proxy = await toxiproxy.createProxy({ name, listen, upstream });
            return proxy.toJson();
        }
        case "latency": {
            const [name, ms] = args;
            const proxy = await toxiproxy.get(name);
            const toxic = await proxy.addToxic({
                type: "latency",
                stream: "downstream",
                toxicity: 1,
                attributes: { latency: Number(ms), jitter: 0 },
            });
            return toxic.toJson();
        }
        case "toxic": {
            // Any toxic, named, so that several stack on one proxy.
            const [name, toxicName, type, stream, attributes] = args;
            const proxy = await toxiproxy.get(name);
            const toxic = await proxy.addToxic({
                name: toxicName,
                type,
                stream,
                toxicity: 1,
                attributes: JSON.parse(attributes),
            });
            return toxic.toJson();
        }
        case "remove-toxic": {
            const [name, toxicName] = args;
            const proxy = await toxiproxy.get(name);
            const toxic = await proxy.getToxic(toxicName);
            await toxic.remove();
            return { removed: toxicName };
        }
        case "down":
        case "up": {
            const [name] = args;
            const proxy = await toxiproxy.get(name);
            const updated = await proxy.update({ ...proxy.toJson(), enabled: step === "up" });
            return updated.toJson();
        }
        case "toxics": {
            const [name] = args;
            const res = await toxiproxy.getApi().get(`${url}/proxies/${name}/toxics`);
            return { toxics: res.data };
        }
        case "reset":
            await toxiproxy.reset();
            return { reset: true };
        default:
            throw new Error(`unknown step ${step}`);
    }
}

main().then(
    (result) => console.log(JSON.stringify(result)),
    (err) => {
        console.error(`${err.name}: ${err.message}`);
        process.exit(1);
    },
);
