// Types of the ES module entry point (index.mjs): the same declarations as index.d.ts.
import * as idcar from './index.js';

export * from './index.js';
export default idcar;
