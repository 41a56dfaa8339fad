// Vite's `?url` imports: the asset is emitted (content-hashed) and the import is its URL.
declare module '*?url' {
  const url: string;
  export default url;
}
