// Types of sources.mjs, for the TypeScript that imports it (bench/).
export declare const SOURCE_DIRS: string[];
export declare const STAMP: string;
export declare function newestSource(root: string): number;
export declare function distIsCurrent(root: string): boolean;
