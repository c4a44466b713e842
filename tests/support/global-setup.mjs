// Jest loads global setup outside its module transform; tsx loads the TypeScript behind it.
import { tsImport } from 'tsx/esm/api';

export default async function globalSetup() {
  const { default: setup } = await tsImport('./postgres-setup.ts', import.meta.url);
  await setup();
}
