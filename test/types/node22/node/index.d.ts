// @types/node 22 under the name "node" for tsconfig.node22.json's typeRoots.
/// <reference path="../../../../node_modules/@types/node22/index.d.ts" />
