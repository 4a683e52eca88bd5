'use strict';
// A TCP proxy on 127.0.0.1 between clients and a server, for the stress
// test's network cut: cut() stops forwarding on every connection open now,
// in both directions, without closing a socket (no FIN, no RST: each side
// sees a silent peer, as behind a dead link; what is sent stays unread in
// the kernel's buffers). Connections made after a cut are forwarded.
//
//   const proxy = await Proxy.start('127.0.0.1', 5432);
//   ... connect to 127.0.0.1:proxy.port ...
//   proxy.cut();   // how many connections it cut
//   await proxy.close();
const net = require('node:net');

class Proxy {
  constructor(targetHost, targetPort) {
    this.targetHost = targetHost;
    this.targetPort = targetPort;
    this.pairs = new Set();
    this.server = net.createServer((client) => this.forward(client));
    this.port = 0;
  }

  static async start(targetHost, targetPort) {
    const proxy = new Proxy(targetHost, targetPort);
    await new Promise((resolve, reject) => {
      proxy.server.once('error', reject);
      proxy.server.listen(0, '127.0.0.1', () => {
        proxy.server.off('error', reject);
        resolve();
      });
    });
    proxy.port = proxy.server.address().port;
    return proxy;
  }

  forward(client) {
    const server = net.connect(this.targetPort, this.targetHost);
    const pair = { client, server, cut: false };
    this.pairs.add(pair);
    client.pipe(server);
    server.pipe(client);
    // One side ends or fails: so does the other, unless cut (a cut link
    // carries nothing, its end included).
    const close = () => {
      if (pair.cut) return;
      this.pairs.delete(pair);
      client.destroy();
      server.destroy();
    };
    for (const socket of [client, server]) {
      socket.on('error', close);
      socket.on('close', close);
    }
  }

  // Stops forwarding on every open connection; returns how many.
  cut() {
    let count = 0;
    for (const pair of this.pairs) {
      if (pair.cut) continue;
      pair.cut = true;
      pair.client.unpipe(pair.server);
      pair.server.unpipe(pair.client);
      pair.client.pause();
      pair.server.pause();
      count++;
    }
    return count;
  }

  // How many connections are open and forwarded.
  get forwarding() {
    let count = 0;
    for (const pair of this.pairs) if (!pair.cut) count++;
    return count;
  }

  close() {
    for (const pair of this.pairs) {
      pair.cut = true;
      pair.client.destroy();
      pair.server.destroy();
    }
    this.pairs.clear();
    return new Promise((resolve) => this.server.close(() => resolve()));
  }
}

module.exports = { Proxy };
