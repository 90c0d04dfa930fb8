// Renders Flexsite's OpenAPI document with Swagger UI. Everything is served by the binary
// itself: no external URLs, and no online validator (validatorUrl: null).
window.ui = SwaggerUIBundle({
  url: new URL("openapi.json", document.baseURI).href,
  dom_id: "#swagger-ui",
  deepLinking: true,
  validatorUrl: null,
  docExpansion: "list",
  defaultModelsExpandDepth: 0,
  tryItOutEnabled: false,
  presets: [SwaggerUIBundle.presets.apis],
  layout: "BaseLayout",
});
