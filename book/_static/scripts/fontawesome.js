/*!
 * Font Awesome Free 6.5.2 by @fontawesome - https://fontawesome.com
 * License - https://fontawesome.com/license/free (Icons: CC BY 4.0, Fonts: SIL OFL 1.1, Code: MIT License)
 * Copyright 2024 Fonticons, Inc.
 *
 * The labformer book's subset: the theme's 14 icons (68 KB in place of the theme's 1.5 MB
 * fontawesome.js, which this file replaces in _static/scripts). Built from the npm packages
 * @fortawesome/fontawesome-svg-core@6.5.2 and @fortawesome/free-solid-svg-icons@6.5.2 with
 * esbuild@0.24.0 (--bundle --minify --format=iife --target=es2018) from fontawesome-subset.mjs.
 */
(()=>{function a1(c,a){var e=Object.keys(c);if(Object.getOwnPropertySymbols){var r=Object.getOwnPropertySymbols(c);a&&(r=r.filter(function(s){return Object.getOwnPropertyDescriptor(c,s).enumerable})),e.push.apply(e,r)}return e}function t(c){for(var a=1;a<arguments.length;a++){var e=arguments[a]!=null?arguments[a]:{};a%2?a1(Object(e),!0).forEach(function(r){C(c,r,e[r])}):Object.getOwnPropertyDescriptors?Object.defineProperties(c,Object.getOwnPropertyDescriptors(e)):a1(Object(e)).forEach(function(r){Object.defineProperty(c,r,Object.getOwnPropertyDescriptor(e,r))})}return c}function C2(c){"@babel/helpers - typeof";return C2=typeof Symbol=="function"&&typeof Symbol.iterator=="symbol"?function(a){return typeof a}:function(a){return a&&typeof Symbol=="function"&&a.constructor===Symbol&&a!==Symbol.prototype?"symbol":typeof a},C2(c)}function M3(c,a){if(!(c instanceof a))throw new TypeError("Cannot call a class as a function")}function e1(c,a){for(var e=0;e<a.length;e++){var r=a[e];r.enumerable=r.enumerable||!1,r.configurable=!0,"value"in r&&(r.writable=!0),Object.defineProperty(c,r.key,r)}}function p3(c,a,e){return a&&e1(c.prototype,a),e&&e1(c,e),Object.defineProperty(c,"prototype",{writable:!1}),c}function C(c,a,e){return a in c?Object.defineProperty(c,a,{value:e,enumerable:!0,configurable:!0,writable:!0}):c[a]=e,c}function W2(c,a){return u3(c)||d3(c,a)||S1(c,a)||x3()}function i2(c){return C3(c)||L3(c)||S1(c)||g3()}function C3(c){if(Array.isArray(c))return y2(c)}function u3(c){if(Array.isArray(c))return c}function L3(c){if(typeof Symbol!="undefined"&&c[Symbol.iterator]!=null||c["@@iterator"]!=null)return Array.from(c)}function d3(c,a){var e=c==null?null:typeof Symbol!="undefined"&&c[Symbol.iterator]||c["@@iterator"];if(e!=null){var r=[],s=!0,f=!1,i,n;try{for(e=e.call(c);!(s=(i=e.next()).done)&&(r.push(i.value),!(a&&r.length===a));s=!0);}catch(l){f=!0,n=l}finally{try{!s&&e.return!=null&&e.return()}finally{if(f)throw n}}return r}}function S1(c,a){if(c){if(typeof c=="string")return y2(c,a);var e=Object.prototype.toString.call(c).slice(8,-1);if(e==="Object"&&c.constructor&&(e=c.constructor.name),e==="Map"||e==="Set")return Array.from(c);if(e==="Arguments"||/^(?:Ui|I)nt(?:8|16|32)(?:Clamped)?Array$/.test(e))return y2(c,a)}}function y2(c,a){(a==null||a>c.length)&&(a=c.length);for(var e=0,r=new Array(a);e<a;e++)r[e]=c[e];return r}function g3(){throw new TypeError(`Invalid attempt to spread non-iterable instance.
In order to be iterable, non-array objects must have a [Symbol.iterator]() method.`)}function x3(){throw new TypeError(`Invalid attempt to destructure non-iterable instance.
In order to be iterable, non-array objects must have a [Symbol.iterator]() method.`)}var r1=function(){},G2={},k1={},w1=null,A1={mark:r1,measure:r1};try{typeof window!="undefined"&&(G2=window),typeof document!="undefined"&&(k1=document),typeof MutationObserver!="undefined"&&(w1=MutationObserver),typeof performance!="undefined"&&(A1=performance)}catch(c){}var N3=G2.navigator||{},s1=N3.userAgent,i1=s1===void 0?"":s1,R=G2,M=k1,f1=w1,l2=A1,Y4=!!R.document,B=!!M.documentElement&&!!M.head&&typeof M.addEventListener=="function"&&typeof M.createElement=="function",y1=~i1.indexOf("MSIE")||~i1.indexOf("Trident/"),o2,t2,m2,H2,z2,y="___FONT_AWESOME___",P2=16,P1="fa",T1="svg-inline--fa",I="data-fa-i2svg",T2="data-fa-pseudo-element",b3="data-fa-pseudo-element-pending",I2="data-prefix",_2="data-icon",n1="fontawesome-i2svg",S3="async",k3=["HTML","HEAD","STYLE","SCRIPT"],B1=function(){try{return!0}catch(c){return!1}}(),h="classic",p="sharp",j2=[h,p];function f2(c){return new Proxy(c,{get:function(e,r){return r in e?e[r]:e[h]}})}var c2=f2((o2={},C(o2,h,{fa:"solid",fas:"solid","fa-solid":"solid",far:"regular","fa-regular":"regular",fal:"light","fa-light":"light",fat:"thin","fa-thin":"thin",fad:"duotone","fa-duotone":"duotone",fab:"brands","fa-brands":"brands",fak:"kit",fakd:"kit","fa-kit":"kit","fa-kit-duotone":"kit"}),C(o2,p,{fa:"solid",fass:"solid","fa-solid":"solid",fasr:"regular","fa-regular":"regular",fasl:"light","fa-light":"light",fast:"thin","fa-thin":"thin"}),o2)),a2=f2((t2={},C(t2,h,{solid:"fas",regular:"far",light:"fal",thin:"fat",duotone:"fad",brands:"fab",kit:"fak"}),C(t2,p,{solid:"fass",regular:"fasr",light:"fasl",thin:"fast"}),t2)),e2=f2((m2={},C(m2,h,{fab:"fa-brands",fad:"fa-duotone",fak:"fa-kit",fal:"fa-light",far:"fa-regular",fas:"fa-solid",fat:"fa-thin"}),C(m2,p,{fass:"fa-solid",fasr:"fa-regular",fasl:"fa-light",fast:"fa-thin"}),m2)),w3=f2((H2={},C(H2,h,{"fa-brands":"fab","fa-duotone":"fad","fa-kit":"fak","fa-light":"fal","fa-regular":"far","fa-solid":"fas","fa-thin":"fat"}),C(H2,p,{"fa-solid":"fass","fa-regular":"fasr","fa-light":"fasl","fa-thin":"fast"}),H2)),A3=/fa(s|r|l|t|d|b|k|ss|sr|sl|st)?[\-\ ]/,F1="fa-layers-text",y3=/Font ?Awesome ?([56 ]*)(Solid|Regular|Light|Thin|Duotone|Brands|Free|Pro|Sharp|Kit)?.*/i,P3=f2((z2={},C(z2,h,{900:"fas",400:"far",normal:"far",300:"fal",100:"fat"}),C(z2,p,{900:"fass",400:"fasr",300:"fasl",100:"fast"}),z2)),D1=[1,2,3,4,5,6,7,8,9,10],T3=D1.concat([11,12,13,14,15,16,17,18,19,20]),B3=["class","data-prefix","data-icon","data-fa-transform","data-fa-mask"],W={GROUP:"duotone-group",SWAP_OPACITY:"swap-opacity",PRIMARY:"primary",SECONDARY:"secondary"},r2=new Set;Object.keys(a2[h]).map(r2.add.bind(r2));Object.keys(a2[p]).map(r2.add.bind(r2));var F3=[].concat(j2,i2(r2),["2xs","xs","sm","lg","xl","2xl","beat","border","fade","beat-fade","bounce","flip-both","flip-horizontal","flip-vertical","flip","fw","inverse","layers-counter","layers-text","layers","li","pull-left","pull-right","pulse","rotate-180","rotate-270","rotate-90","rotate-by","shake","spin-pulse","spin-reverse","spin","stack-1x","stack-2x","stack","ul",W.GROUP,W.SWAP_OPACITY,W.PRIMARY,W.SECONDARY]).concat(D1.map(function(c){return"".concat(c,"x")})).concat(T3.map(function(c){return"w-".concat(c)})),J=R.FontAwesomeConfig||{};function D3(c){var a=M.querySelector("script["+c+"]");if(a)return a.getAttribute(c)}function R3(c){return c===""?!0:c==="false"?!1:c==="true"?!0:c}M&&typeof M.querySelector=="function"&&(l1=[["data-family-prefix","familyPrefix"],["data-css-prefix","cssPrefix"],["data-family-default","familyDefault"],["data-style-default","styleDefault"],["data-replacement-class","replacementClass"],["data-auto-replace-svg","autoReplaceSvg"],["data-auto-add-css","autoAddCss"],["data-auto-a11y","autoA11y"],["data-search-pseudo-elements","searchPseudoElements"],["data-observe-mutations","observeMutations"],["data-mutate-approach","mutateApproach"],["data-keep-original-source","keepOriginalSource"],["data-measure-performance","measurePerformance"],["data-show-missing-icons","showMissingIcons"]],l1.forEach(function(c){var a=W2(c,2),e=a[0],r=a[1],s=R3(D3(e));s!=null&&(J[r]=s)}));var l1,R1={styleDefault:"solid",familyDefault:"classic",cssPrefix:P1,replacementClass:T1,autoReplaceSvg:!0,autoAddCss:!0,autoA11y:!0,searchPseudoElements:!1,observeMutations:!0,mutateApproach:"async",keepOriginalSource:!0,measurePerformance:!1,showMissingIcons:!0};J.familyPrefix&&(J.cssPrefix=J.familyPrefix);var $=t(t({},R1),J);$.autoReplaceSvg||($.observeMutations=!1);var H={};Object.keys(R1).forEach(function(c){Object.defineProperty(H,c,{enumerable:!0,set:function(e){$[c]=e,Z.forEach(function(r){return r(H)})},get:function(){return $[c]}})});Object.defineProperty(H,"familyPrefix",{enumerable:!0,set:function(a){$.cssPrefix=a,Z.forEach(function(e){return e(H)})},get:function(){return $.cssPrefix}});R.FontAwesomeConfig=H;var Z=[];function E3(c){return Z.push(c),function(){Z.splice(Z.indexOf(c),1)}}var D=P2,A={size:16,x:0,y:0,rotate:0,flipX:!1,flipY:!1};function U3(c){if(!(!c||!B)){var a=M.createElement("style");a.setAttribute("type","text/css"),a.innerHTML=c;for(var e=M.head.childNodes,r=null,s=e.length-1;s>-1;s--){var f=e[s],i=(f.tagName||"").toUpperCase();["STYLE","LINK"].indexOf(i)>-1&&(r=f)}return M.head.insertBefore(a,r),c}}var q3="0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";function s2(){for(var c=12,a="";c-- >0;)a+=q3[Math.random()*62|0];return a}function Q(c){for(var a=[],e=(c||[]).length>>>0;e--;)a[e]=c[e];return a}function X2(c){return c.classList?Q(c.classList):(c.getAttribute("class")||"").split(" ").filter(function(a){return a})}function E1(c){return"".concat(c).replace(/&/g,"&amp;").replace(/"/g,"&quot;").replace(/'/g,"&#39;").replace(/</g,"&lt;").replace(/>/g,"&gt;")}function O3(c){return Object.keys(c||{}).reduce(function(a,e){return a+"".concat(e,'="').concat(E1(c[e]),'" ')},"").trim()}function d2(c){return Object.keys(c||{}).reduce(function(a,e){return a+"".concat(e,": ").concat(c[e].trim(),";")},"")}function Y2(c){return c.size!==A.size||c.x!==A.x||c.y!==A.y||c.rotate!==A.rotate||c.flipX||c.flipY}function W3(c){var a=c.transform,e=c.containerWidth,r=c.iconWidth,s={transform:"translate(".concat(e/2," 256)")},f="translate(".concat(a.x*32,", ").concat(a.y*32,") "),i="scale(".concat(a.size/16*(a.flipX?-1:1),", ").concat(a.size/16*(a.flipY?-1:1),") "),n="rotate(".concat(a.rotate," 0 0)"),l={transform:"".concat(f," ").concat(i," ").concat(n)},m={transform:"translate(".concat(r/2*-1," -256)")};return{outer:s,inner:l,path:m}}function G3(c){var a=c.transform,e=c.width,r=e===void 0?P2:e,s=c.height,f=s===void 0?P2:s,i=c.startCentered,n=i===void 0?!1:i,l="";return n&&y1?l+="translate(".concat(a.x/D-r/2,"em, ").concat(a.y/D-f/2,"em) "):n?l+="translate(calc(-50% + ".concat(a.x/D,"em), calc(-50% + ").concat(a.y/D,"em)) "):l+="translate(".concat(a.x/D,"em, ").concat(a.y/D,"em) "),l+="scale(".concat(a.size/D*(a.flipX?-1:1),", ").concat(a.size/D*(a.flipY?-1:1),") "),l+="rotate(".concat(a.rotate,"deg) "),l}var I3=`:root, :host {
  --fa-font-solid: normal 900 1em/1 "Font Awesome 6 Solid";
  --fa-font-regular: normal 400 1em/1 "Font Awesome 6 Regular";
  --fa-font-light: normal 300 1em/1 "Font Awesome 6 Light";
  --fa-font-thin: normal 100 1em/1 "Font Awesome 6 Thin";
  --fa-font-duotone: normal 900 1em/1 "Font Awesome 6 Duotone";
  --fa-font-sharp-solid: normal 900 1em/1 "Font Awesome 6 Sharp";
  --fa-font-sharp-regular: normal 400 1em/1 "Font Awesome 6 Sharp";
  --fa-font-sharp-light: normal 300 1em/1 "Font Awesome 6 Sharp";
  --fa-font-sharp-thin: normal 100 1em/1 "Font Awesome 6 Sharp";
  --fa-font-brands: normal 400 1em/1 "Font Awesome 6 Brands";
}

svg:not(:root).svg-inline--fa, svg:not(:host).svg-inline--fa {
  overflow: visible;
  box-sizing: content-box;
}

.svg-inline--fa {
  display: var(--fa-display, inline-block);
  height: 1em;
  overflow: visible;
  vertical-align: -0.125em;
}
.svg-inline--fa.fa-2xs {
  vertical-align: 0.1em;
}
.svg-inline--fa.fa-xs {
  vertical-align: 0em;
}
.svg-inline--fa.fa-sm {
  vertical-align: -0.0714285705em;
}
.svg-inline--fa.fa-lg {
  vertical-align: -0.2em;
}
.svg-inline--fa.fa-xl {
  vertical-align: -0.25em;
}
.svg-inline--fa.fa-2xl {
  vertical-align: -0.3125em;
}
.svg-inline--fa.fa-pull-left {
  margin-right: var(--fa-pull-margin, 0.3em);
  width: auto;
}
.svg-inline--fa.fa-pull-right {
  margin-left: var(--fa-pull-margin, 0.3em);
  width: auto;
}
.svg-inline--fa.fa-li {
  width: var(--fa-li-width, 2em);
  top: 0.25em;
}
.svg-inline--fa.fa-fw {
  width: var(--fa-fw-width, 1.25em);
}

.fa-layers svg.svg-inline--fa {
  bottom: 0;
  left: 0;
  margin: auto;
  position: absolute;
  right: 0;
  top: 0;
}

.fa-layers-counter, .fa-layers-text {
  display: inline-block;
  position: absolute;
  text-align: center;
}

.fa-layers {
  display: inline-block;
  height: 1em;
  position: relative;
  text-align: center;
  vertical-align: -0.125em;
  width: 1em;
}
.fa-layers svg.svg-inline--fa {
  -webkit-transform-origin: center center;
          transform-origin: center center;
}

.fa-layers-text {
  left: 50%;
  top: 50%;
  -webkit-transform: translate(-50%, -50%);
          transform: translate(-50%, -50%);
  -webkit-transform-origin: center center;
          transform-origin: center center;
}

.fa-layers-counter {
  background-color: var(--fa-counter-background-color, #ff253a);
  border-radius: var(--fa-counter-border-radius, 1em);
  box-sizing: border-box;
  color: var(--fa-inverse, #fff);
  line-height: var(--fa-counter-line-height, 1);
  max-width: var(--fa-counter-max-width, 5em);
  min-width: var(--fa-counter-min-width, 1.5em);
  overflow: hidden;
  padding: var(--fa-counter-padding, 0.25em 0.5em);
  right: var(--fa-right, 0);
  text-overflow: ellipsis;
  top: var(--fa-top, 0);
  -webkit-transform: scale(var(--fa-counter-scale, 0.25));
          transform: scale(var(--fa-counter-scale, 0.25));
  -webkit-transform-origin: top right;
          transform-origin: top right;
}

.fa-layers-bottom-right {
  bottom: var(--fa-bottom, 0);
  right: var(--fa-right, 0);
  top: auto;
  -webkit-transform: scale(var(--fa-layers-scale, 0.25));
          transform: scale(var(--fa-layers-scale, 0.25));
  -webkit-transform-origin: bottom right;
          transform-origin: bottom right;
}

.fa-layers-bottom-left {
  bottom: var(--fa-bottom, 0);
  left: var(--fa-left, 0);
  right: auto;
  top: auto;
  -webkit-transform: scale(var(--fa-layers-scale, 0.25));
          transform: scale(var(--fa-layers-scale, 0.25));
  -webkit-transform-origin: bottom left;
          transform-origin: bottom left;
}

.fa-layers-top-right {
  top: var(--fa-top, 0);
  right: var(--fa-right, 0);
  -webkit-transform: scale(var(--fa-layers-scale, 0.25));
          transform: scale(var(--fa-layers-scale, 0.25));
  -webkit-transform-origin: top right;
          transform-origin: top right;
}

.fa-layers-top-left {
  left: var(--fa-left, 0);
  right: auto;
  top: var(--fa-top, 0);
  -webkit-transform: scale(var(--fa-layers-scale, 0.25));
          transform: scale(var(--fa-layers-scale, 0.25));
  -webkit-transform-origin: top left;
          transform-origin: top left;
}

.fa-1x {
  font-size: 1em;
}

.fa-2x {
  font-size: 2em;
}

.fa-3x {
  font-size: 3em;
}

.fa-4x {
  font-size: 4em;
}

.fa-5x {
  font-size: 5em;
}

.fa-6x {
  font-size: 6em;
}

.fa-7x {
  font-size: 7em;
}

.fa-8x {
  font-size: 8em;
}

.fa-9x {
  font-size: 9em;
}

.fa-10x {
  font-size: 10em;
}

.fa-2xs {
  font-size: 0.625em;
  line-height: 0.1em;
  vertical-align: 0.225em;
}

.fa-xs {
  font-size: 0.75em;
  line-height: 0.0833333337em;
  vertical-align: 0.125em;
}

.fa-sm {
  font-size: 0.875em;
  line-height: 0.0714285718em;
  vertical-align: 0.0535714295em;
}

.fa-lg {
  font-size: 1.25em;
  line-height: 0.05em;
  vertical-align: -0.075em;
}

.fa-xl {
  font-size: 1.5em;
  line-height: 0.0416666682em;
  vertical-align: -0.125em;
}

.fa-2xl {
  font-size: 2em;
  line-height: 0.03125em;
  vertical-align: -0.1875em;
}

.fa-fw {
  text-align: center;
  width: 1.25em;
}

.fa-ul {
  list-style-type: none;
  margin-left: var(--fa-li-margin, 2.5em);
  padding-left: 0;
}
.fa-ul > li {
  position: relative;
}

.fa-li {
  left: calc(var(--fa-li-width, 2em) * -1);
  position: absolute;
  text-align: center;
  width: var(--fa-li-width, 2em);
  line-height: inherit;
}

.fa-border {
  border-color: var(--fa-border-color, #eee);
  border-radius: var(--fa-border-radius, 0.1em);
  border-style: var(--fa-border-style, solid);
  border-width: var(--fa-border-width, 0.08em);
  padding: var(--fa-border-padding, 0.2em 0.25em 0.15em);
}

.fa-pull-left {
  float: left;
  margin-right: var(--fa-pull-margin, 0.3em);
}

.fa-pull-right {
  float: right;
  margin-left: var(--fa-pull-margin, 0.3em);
}

.fa-beat {
  -webkit-animation-name: fa-beat;
          animation-name: fa-beat;
  -webkit-animation-delay: var(--fa-animation-delay, 0s);
          animation-delay: var(--fa-animation-delay, 0s);
  -webkit-animation-direction: var(--fa-animation-direction, normal);
          animation-direction: var(--fa-animation-direction, normal);
  -webkit-animation-duration: var(--fa-animation-duration, 1s);
          animation-duration: var(--fa-animation-duration, 1s);
  -webkit-animation-iteration-count: var(--fa-animation-iteration-count, infinite);
          animation-iteration-count: var(--fa-animation-iteration-count, infinite);
  -webkit-animation-timing-function: var(--fa-animation-timing, ease-in-out);
          animation-timing-function: var(--fa-animation-timing, ease-in-out);
}

.fa-bounce {
  -webkit-animation-name: fa-bounce;
          animation-name: fa-bounce;
  -webkit-animation-delay: var(--fa-animation-delay, 0s);
          animation-delay: var(--fa-animation-delay, 0s);
  -webkit-animation-direction: var(--fa-animation-direction, normal);
          animation-direction: var(--fa-animation-direction, normal);
  -webkit-animation-duration: var(--fa-animation-duration, 1s);
          animation-duration: var(--fa-animation-duration, 1s);
  -webkit-animation-iteration-count: var(--fa-animation-iteration-count, infinite);
          animation-iteration-count: var(--fa-animation-iteration-count, infinite);
  -webkit-animation-timing-function: var(--fa-animation-timing, cubic-bezier(0.28, 0.84, 0.42, 1));
          animation-timing-function: var(--fa-animation-timing, cubic-bezier(0.28, 0.84, 0.42, 1));
}

.fa-fade {
  -webkit-animation-name: fa-fade;
          animation-name: fa-fade;
  -webkit-animation-delay: var(--fa-animation-delay, 0s);
          animation-delay: var(--fa-animation-delay, 0s);
  -webkit-animation-direction: var(--fa-animation-direction, normal);
          animation-direction: var(--fa-animation-direction, normal);
  -webkit-animation-duration: var(--fa-animation-duration, 1s);
          animation-duration: var(--fa-animation-duration, 1s);
  -webkit-animation-iteration-count: var(--fa-animation-iteration-count, infinite);
          animation-iteration-count: var(--fa-animation-iteration-count, infinite);
  -webkit-animation-timing-function: var(--fa-animation-timing, cubic-bezier(0.4, 0, 0.6, 1));
          animation-timing-function: var(--fa-animation-timing, cubic-bezier(0.4, 0, 0.6, 1));
}

.fa-beat-fade {
  -webkit-animation-name: fa-beat-fade;
          animation-name: fa-beat-fade;
  -webkit-animation-delay: var(--fa-animation-delay, 0s);
          animation-delay: var(--fa-animation-delay, 0s);
  -webkit-animation-direction: var(--fa-animation-direction, normal);
          animation-direction: var(--fa-animation-direction, normal);
  -webkit-animation-duration: var(--fa-animation-duration, 1s);
          animation-duration: var(--fa-animation-duration, 1s);
  -webkit-animation-iteration-count: var(--fa-animation-iteration-count, infinite);
          animation-iteration-count: var(--fa-animation-iteration-count, infinite);
  -webkit-animation-timing-function: var(--fa-animation-timing, cubic-bezier(0.4, 0, 0.6, 1));
          animation-timing-function: var(--fa-animation-timing, cubic-bezier(0.4, 0, 0.6, 1));
}

.fa-flip {
  -webkit-animation-name: fa-flip;
          animation-name: fa-flip;
  -webkit-animation-delay: var(--fa-animation-delay, 0s);
          animation-delay: var(--fa-animation-delay, 0s);
  -webkit-animation-direction: var(--fa-animation-direction, normal);
          animation-direction: var(--fa-animation-direction, normal);
  -webkit-animation-duration: var(--fa-animation-duration, 1s);
          animation-duration: var(--fa-animation-duration, 1s);
  -webkit-animation-iteration-count: var(--fa-animation-iteration-count, infinite);
          animation-iteration-count: var(--fa-animation-iteration-count, infinite);
  -webkit-animation-timing-function: var(--fa-animation-timing, ease-in-out);
          animation-timing-function: var(--fa-animation-timing, ease-in-out);
}

.fa-shake {
  -webkit-animation-name: fa-shake;
          animation-name: fa-shake;
  -webkit-animation-delay: var(--fa-animation-delay, 0s);
          animation-delay: var(--fa-animation-delay, 0s);
  -webkit-animation-direction: var(--fa-animation-direction, normal);
          animation-direction: var(--fa-animation-direction, normal);
  -webkit-animation-duration: var(--fa-animation-duration, 1s);
          animation-duration: var(--fa-animation-duration, 1s);
  -webkit-animation-iteration-count: var(--fa-animation-iteration-count, infinite);
          animation-iteration-count: var(--fa-animation-iteration-count, infinite);
  -webkit-animation-timing-function: var(--fa-animation-timing, linear);
          animation-timing-function: var(--fa-animation-timing, linear);
}

.fa-spin {
  -webkit-animation-name: fa-spin;
          animation-name: fa-spin;
  -webkit-animation-delay: var(--fa-animation-delay, 0s);
          animation-delay: var(--fa-animation-delay, 0s);
  -webkit-animation-direction: var(--fa-animation-direction, normal);
          animation-direction: var(--fa-animation-direction, normal);
  -webkit-animation-duration: var(--fa-animation-duration, 2s);
          animation-duration: var(--fa-animation-duration, 2s);
  -webkit-animation-iteration-count: var(--fa-animation-iteration-count, infinite);
          animation-iteration-count: var(--fa-animation-iteration-count, infinite);
  -webkit-animation-timing-function: var(--fa-animation-timing, linear);
          animation-timing-function: var(--fa-animation-timing, linear);
}

.fa-spin-reverse {
  --fa-animation-direction: reverse;
}

.fa-pulse,
.fa-spin-pulse {
  -webkit-animation-name: fa-spin;
          animation-name: fa-spin;
  -webkit-animation-direction: var(--fa-animation-direction, normal);
          animation-direction: var(--fa-animation-direction, normal);
  -webkit-animation-duration: var(--fa-animation-duration, 1s);
          animation-duration: var(--fa-animation-duration, 1s);
  -webkit-animation-iteration-count: var(--fa-animation-iteration-count, infinite);
          animation-iteration-count: var(--fa-animation-iteration-count, infinite);
  -webkit-animation-timing-function: var(--fa-animation-timing, steps(8));
          animation-timing-function: var(--fa-animation-timing, steps(8));
}

@media (prefers-reduced-motion: reduce) {
  .fa-beat,
.fa-bounce,
.fa-fade,
.fa-beat-fade,
.fa-flip,
.fa-pulse,
.fa-shake,
.fa-spin,
.fa-spin-pulse {
    -webkit-animation-delay: -1ms;
            animation-delay: -1ms;
    -webkit-animation-duration: 1ms;
            animation-duration: 1ms;
    -webkit-animation-iteration-count: 1;
            animation-iteration-count: 1;
    -webkit-transition-delay: 0s;
            transition-delay: 0s;
    -webkit-transition-duration: 0s;
            transition-duration: 0s;
  }
}
@-webkit-keyframes fa-beat {
  0%, 90% {
    -webkit-transform: scale(1);
            transform: scale(1);
  }
  45% {
    -webkit-transform: scale(var(--fa-beat-scale, 1.25));
            transform: scale(var(--fa-beat-scale, 1.25));
  }
}
@keyframes fa-beat {
  0%, 90% {
    -webkit-transform: scale(1);
            transform: scale(1);
  }
  45% {
    -webkit-transform: scale(var(--fa-beat-scale, 1.25));
            transform: scale(var(--fa-beat-scale, 1.25));
  }
}
@-webkit-keyframes fa-bounce {
  0% {
    -webkit-transform: scale(1, 1) translateY(0);
            transform: scale(1, 1) translateY(0);
  }
  10% {
    -webkit-transform: scale(var(--fa-bounce-start-scale-x, 1.1), var(--fa-bounce-start-scale-y, 0.9)) translateY(0);
            transform: scale(var(--fa-bounce-start-scale-x, 1.1), var(--fa-bounce-start-scale-y, 0.9)) translateY(0);
  }
  30% {
    -webkit-transform: scale(var(--fa-bounce-jump-scale-x, 0.9), var(--fa-bounce-jump-scale-y, 1.1)) translateY(var(--fa-bounce-height, -0.5em));
            transform: scale(var(--fa-bounce-jump-scale-x, 0.9), var(--fa-bounce-jump-scale-y, 1.1)) translateY(var(--fa-bounce-height, -0.5em));
  }
  50% {
    -webkit-transform: scale(var(--fa-bounce-land-scale-x, 1.05), var(--fa-bounce-land-scale-y, 0.95)) translateY(0);
            transform: scale(var(--fa-bounce-land-scale-x, 1.05), var(--fa-bounce-land-scale-y, 0.95)) translateY(0);
  }
  57% {
    -webkit-transform: scale(1, 1) translateY(var(--fa-bounce-rebound, -0.125em));
            transform: scale(1, 1) translateY(var(--fa-bounce-rebound, -0.125em));
  }
  64% {
    -webkit-transform: scale(1, 1) translateY(0);
            transform: scale(1, 1) translateY(0);
  }
  100% {
    -webkit-transform: scale(1, 1) translateY(0);
            transform: scale(1, 1) translateY(0);
  }
}
@keyframes fa-bounce {
  0% {
    -webkit-transform: scale(1, 1) translateY(0);
            transform: scale(1, 1) translateY(0);
  }
  10% {
    -webkit-transform: scale(var(--fa-bounce-start-scale-x, 1.1), var(--fa-bounce-start-scale-y, 0.9)) translateY(0);
            transform: scale(var(--fa-bounce-start-scale-x, 1.1), var(--fa-bounce-start-scale-y, 0.9)) translateY(0);
  }
  30% {
    -webkit-transform: scale(var(--fa-bounce-jump-scale-x, 0.9), var(--fa-bounce-jump-scale-y, 1.1)) translateY(var(--fa-bounce-height, -0.5em));
            transform: scale(var(--fa-bounce-jump-scale-x, 0.9), var(--fa-bounce-jump-scale-y, 1.1)) translateY(var(--fa-bounce-height, -0.5em));
  }
  50% {
    -webkit-transform: scale(var(--fa-bounce-land-scale-x, 1.05), var(--fa-bounce-land-scale-y, 0.95)) translateY(0);
            transform: scale(var(--fa-bounce-land-scale-x, 1.05), var(--fa-bounce-land-scale-y, 0.95)) translateY(0);
  }
  57% {
    -webkit-transform: scale(1, 1) translateY(var(--fa-bounce-rebound, -0.125em));
            transform: scale(1, 1) translateY(var(--fa-bounce-rebound, -0.125em));
  }
  64% {
    -webkit-transform: scale(1, 1) translateY(0);
            transform: scale(1, 1) translateY(0);
  }
  100% {
    -webkit-transform: scale(1, 1) translateY(0);
            transform: scale(1, 1) translateY(0);
  }
}
@-webkit-keyframes fa-fade {
  50% {
    opacity: var(--fa-fade-opacity, 0.4);
  }
}
@keyframes fa-fade {
  50% {
    opacity: var(--fa-fade-opacity, 0.4);
  }
}
@-webkit-keyframes fa-beat-fade {
  0%, 100% {
    opacity: var(--fa-beat-fade-opacity, 0.4);
    -webkit-transform: scale(1);
            transform: scale(1);
  }
  50% {
    opacity: 1;
    -webkit-transform: scale(var(--fa-beat-fade-scale, 1.125));
            transform: scale(var(--fa-beat-fade-scale, 1.125));
  }
}
@keyframes fa-beat-fade {
  0%, 100% {
    opacity: var(--fa-beat-fade-opacity, 0.4);
    -webkit-transform: scale(1);
            transform: scale(1);
  }
  50% {
    opacity: 1;
    -webkit-transform: scale(var(--fa-beat-fade-scale, 1.125));
            transform: scale(var(--fa-beat-fade-scale, 1.125));
  }
}
@-webkit-keyframes fa-flip {
  50% {
    -webkit-transform: rotate3d(var(--fa-flip-x, 0), var(--fa-flip-y, 1), var(--fa-flip-z, 0), var(--fa-flip-angle, -180deg));
            transform: rotate3d(var(--fa-flip-x, 0), var(--fa-flip-y, 1), var(--fa-flip-z, 0), var(--fa-flip-angle, -180deg));
  }
}
@keyframes fa-flip {
  50% {
    -webkit-transform: rotate3d(var(--fa-flip-x, 0), var(--fa-flip-y, 1), var(--fa-flip-z, 0), var(--fa-flip-angle, -180deg));
            transform: rotate3d(var(--fa-flip-x, 0), var(--fa-flip-y, 1), var(--fa-flip-z, 0), var(--fa-flip-angle, -180deg));
  }
}
@-webkit-keyframes fa-shake {
  0% {
    -webkit-transform: rotate(-15deg);
            transform: rotate(-15deg);
  }
  4% {
    -webkit-transform: rotate(15deg);
            transform: rotate(15deg);
  }
  8%, 24% {
    -webkit-transform: rotate(-18deg);
            transform: rotate(-18deg);
  }
  12%, 28% {
    -webkit-transform: rotate(18deg);
            transform: rotate(18deg);
  }
  16% {
    -webkit-transform: rotate(-22deg);
            transform: rotate(-22deg);
  }
  20% {
    -webkit-transform: rotate(22deg);
            transform: rotate(22deg);
  }
  32% {
    -webkit-transform: rotate(-12deg);
            transform: rotate(-12deg);
  }
  36% {
    -webkit-transform: rotate(12deg);
            transform: rotate(12deg);
  }
  40%, 100% {
    -webkit-transform: rotate(0deg);
            transform: rotate(0deg);
  }
}
@keyframes fa-shake {
  0% {
    -webkit-transform: rotate(-15deg);
            transform: rotate(-15deg);
  }
  4% {
    -webkit-transform: rotate(15deg);
            transform: rotate(15deg);
  }
  8%, 24% {
    -webkit-transform: rotate(-18deg);
            transform: rotate(-18deg);
  }
  12%, 28% {
    -webkit-transform: rotate(18deg);
            transform: rotate(18deg);
  }
  16% {
    -webkit-transform: rotate(-22deg);
            transform: rotate(-22deg);
  }
  20% {
    -webkit-transform: rotate(22deg);
            transform: rotate(22deg);
  }
  32% {
    -webkit-transform: rotate(-12deg);
            transform: rotate(-12deg);
  }
  36% {
    -webkit-transform: rotate(12deg);
            transform: rotate(12deg);
  }
  40%, 100% {
    -webkit-transform: rotate(0deg);
            transform: rotate(0deg);
  }
}
@-webkit-keyframes fa-spin {
  0% {
    -webkit-transform: rotate(0deg);
            transform: rotate(0deg);
  }
  100% {
    -webkit-transform: rotate(360deg);
            transform: rotate(360deg);
  }
}
@keyframes fa-spin {
  0% {
    -webkit-transform: rotate(0deg);
            transform: rotate(0deg);
  }
  100% {
    -webkit-transform: rotate(360deg);
            transform: rotate(360deg);
  }
}
.fa-rotate-90 {
  -webkit-transform: rotate(90deg);
          transform: rotate(90deg);
}

.fa-rotate-180 {
  -webkit-transform: rotate(180deg);
          transform: rotate(180deg);
}

.fa-rotate-270 {
  -webkit-transform: rotate(270deg);
          transform: rotate(270deg);
}

.fa-flip-horizontal {
  -webkit-transform: scale(-1, 1);
          transform: scale(-1, 1);
}

.fa-flip-vertical {
  -webkit-transform: scale(1, -1);
          transform: scale(1, -1);
}

.fa-flip-both,
.fa-flip-horizontal.fa-flip-vertical {
  -webkit-transform: scale(-1, -1);
          transform: scale(-1, -1);
}

.fa-rotate-by {
  -webkit-transform: rotate(var(--fa-rotate-angle, 0));
          transform: rotate(var(--fa-rotate-angle, 0));
}

.fa-stack {
  display: inline-block;
  vertical-align: middle;
  height: 2em;
  position: relative;
  width: 2.5em;
}

.fa-stack-1x,
.fa-stack-2x {
  bottom: 0;
  left: 0;
  margin: auto;
  position: absolute;
  right: 0;
  top: 0;
  z-index: var(--fa-stack-z-index, auto);
}

.svg-inline--fa.fa-stack-1x {
  height: 1em;
  width: 1.25em;
}
.svg-inline--fa.fa-stack-2x {
  height: 2em;
  width: 2.5em;
}

.fa-inverse {
  color: var(--fa-inverse, #fff);
}

.sr-only,
.fa-sr-only {
  position: absolute;
  width: 1px;
  height: 1px;
  padding: 0;
  margin: -1px;
  overflow: hidden;
  clip: rect(0, 0, 0, 0);
  white-space: nowrap;
  border-width: 0;
}

.sr-only-focusable:not(:focus),
.fa-sr-only-focusable:not(:focus) {
  position: absolute;
  width: 1px;
  height: 1px;
  padding: 0;
  margin: -1px;
  overflow: hidden;
  clip: rect(0, 0, 0, 0);
  white-space: nowrap;
  border-width: 0;
}

.svg-inline--fa .fa-primary {
  fill: var(--fa-primary-color, currentColor);
  opacity: var(--fa-primary-opacity, 1);
}

.svg-inline--fa .fa-secondary {
  fill: var(--fa-secondary-color, currentColor);
  opacity: var(--fa-secondary-opacity, 0.4);
}

.svg-inline--fa.fa-swap-opacity .fa-primary {
  opacity: var(--fa-secondary-opacity, 0.4);
}

.svg-inline--fa.fa-swap-opacity .fa-secondary {
  opacity: var(--fa-primary-opacity, 1);
}

.svg-inline--fa mask .fa-primary,
.svg-inline--fa mask .fa-secondary {
  fill: black;
}

.fad.fa-inverse,
.fa-duotone.fa-inverse {
  color: var(--fa-inverse, #fff);
}`;function U1(){var c=P1,a=T1,e=H.cssPrefix,r=H.replacementClass,s=I3;if(e!==c||r!==a){var f=new RegExp("\\.".concat(c,"\\-"),"g"),i=new RegExp("\\--".concat(c,"\\-"),"g"),n=new RegExp("\\.".concat(a),"g");s=s.replace(f,".".concat(e,"-")).replace(i,"--".concat(e,"-")).replace(n,".".concat(r))}return s}var o1=!1;function S2(){H.autoAddCss&&!o1&&(U3(U1()),o1=!0)}var _3={mixout:function(){return{dom:{css:U1,insertCss:S2}}},hooks:function(){return{beforeDOMElementCreation:function(){S2()},beforeI2svg:function(){S2()}}}},P=R||{};P[y]||(P[y]={});P[y].styles||(P[y].styles={});P[y].hooks||(P[y].hooks={});P[y].shims||(P[y].shims=[]);var S=P[y],q1=[],j3=function c(){M.removeEventListener("DOMContentLoaded",c),u2=1,q1.map(function(a){return a()})},u2=!1;B&&(u2=(M.documentElement.doScroll?/^loaded|^c/:/^loaded|^i|^c/).test(M.readyState),u2||M.addEventListener("DOMContentLoaded",j3));function X3(c){B&&(u2?setTimeout(c,0):q1.push(c))}function n2(c){var a=c.tag,e=c.attributes,r=e===void 0?{}:e,s=c.children,f=s===void 0?[]:s;return typeof c=="string"?E1(c):"<".concat(a," ").concat(O3(r),">").concat(f.map(n2).join(""),"</").concat(a,">")}function t1(c,a,e){if(c&&c[a]&&c[a][e])return{prefix:a,iconName:e,icon:c[a][e]}}var Y3=function(a,e){return function(r,s,f,i){return a.call(e,r,s,f,i)}},k2=function(a,e,r,s){var f=Object.keys(a),i=f.length,n=s!==void 0?Y3(e,s):e,l,m,o;for(r===void 0?(l=1,o=a[f[0]]):(l=0,o=r);l<i;l++)m=f[l],o=n(o,a[m],m,a);return o};function $3(c){for(var a=[],e=0,r=c.length;e<r;){var s=c.charCodeAt(e++);if(s>=55296&&s<=56319&&e<r){var f=c.charCodeAt(e++);(f&64512)==56320?a.push(((s&1023)<<10)+(f&1023)+65536):(a.push(s),e--)}else a.push(s)}return a}function B2(c){var a=$3(c);return a.length===1?a[0].toString(16):null}function Q3(c,a){var e=c.length,r=c.charCodeAt(a),s;return r>=55296&&r<=56319&&e>a+1&&(s=c.charCodeAt(a+1),s>=56320&&s<=57343)?(r-55296)*1024+s-56320+65536:r}function m1(c){return Object.keys(c).reduce(function(a,e){var r=c[e],s=!!r.icon;return s?a[r.iconName]=r.icon:a[e]=r,a},{})}function F2(c,a){var e=arguments.length>2&&arguments[2]!==void 0?arguments[2]:{},r=e.skipHooks,s=r===void 0?!1:r,f=m1(a);typeof S.hooks.addPack=="function"&&!s?S.hooks.addPack(c,m1(a)):S.styles[c]=t(t({},S.styles[c]||{}),f),c==="fas"&&F2("fa",a)}var v2,V2,h2,j=S.styles,K3=S.shims,J3=(v2={},C(v2,h,Object.values(e2[h])),C(v2,p,Object.values(e2[p])),v2),$2=null,O1={},W1={},G1={},I1={},_1={},Z3=(V2={},C(V2,h,Object.keys(c2[h])),C(V2,p,Object.keys(c2[p])),V2);function c4(c){return~F3.indexOf(c)}function a4(c,a){var e=a.split("-"),r=e[0],s=e.slice(1).join("-");return r===c&&s!==""&&!c4(s)?s:null}var j1=function(){var a=function(f){return k2(j,function(i,n,l){return i[l]=k2(n,f,{}),i},{})};O1=a(function(s,f,i){if(f[3]&&(s[f[3]]=i),f[2]){var n=f[2].filter(function(l){return typeof l=="number"});n.forEach(function(l){s[l.toString(16)]=i})}return s}),W1=a(function(s,f,i){if(s[i]=i,f[2]){var n=f[2].filter(function(l){return typeof l=="string"});n.forEach(function(l){s[l]=i})}return s}),_1=a(function(s,f,i){var n=f[2];return s[i]=i,n.forEach(function(l){s[l]=i}),s});var e="far"in j||H.autoFetchSvg,r=k2(K3,function(s,f){var i=f[0],n=f[1],l=f[2];return n==="far"&&!e&&(n="fas"),typeof i=="string"&&(s.names[i]={prefix:n,iconName:l}),typeof i=="number"&&(s.unicodes[i.toString(16)]={prefix:n,iconName:l}),s},{names:{},unicodes:{}});G1=r.names,I1=r.unicodes,$2=g2(H.styleDefault,{family:H.familyDefault})};E3(function(c){$2=g2(c.styleDefault,{family:H.familyDefault})});j1();function Q2(c,a){return(O1[c]||{})[a]}function e4(c,a){return(W1[c]||{})[a]}function G(c,a){return(_1[c]||{})[a]}function X1(c){return G1[c]||{prefix:null,iconName:null}}function r4(c){var a=I1[c],e=Q2("fas",c);return a||(e?{prefix:"fas",iconName:e}:null)||{prefix:null,iconName:null}}function E(){return $2}var K2=function(){return{prefix:null,iconName:null,rest:[]}};function g2(c){var a=arguments.length>1&&arguments[1]!==void 0?arguments[1]:{},e=a.family,r=e===void 0?h:e,s=c2[r][c],f=a2[r][c]||a2[r][s],i=c in S.styles?c:null;return f||i||null}var H1=(h2={},C(h2,h,Object.keys(e2[h])),C(h2,p,Object.keys(e2[p])),h2);function x2(c){var a,e=arguments.length>1&&arguments[1]!==void 0?arguments[1]:{},r=e.skipLookups,s=r===void 0?!1:r,f=(a={},C(a,h,"".concat(H.cssPrefix,"-").concat(h)),C(a,p,"".concat(H.cssPrefix,"-").concat(p)),a),i=null,n=h;(c.includes(f[h])||c.some(function(m){return H1[h].includes(m)}))&&(n=h),(c.includes(f[p])||c.some(function(m){return H1[p].includes(m)}))&&(n=p);var l=c.reduce(function(m,o){var z=a4(H.cssPrefix,o);if(j[o]?(o=J3[n].includes(o)?w3[n][o]:o,i=o,m.prefix=o):Z3[n].indexOf(o)>-1?(i=o,m.prefix=g2(o,{family:n})):z?m.iconName=z:o!==H.replacementClass&&o!==f[h]&&o!==f[p]&&m.rest.push(o),!s&&m.prefix&&m.iconName){var v=i==="fa"?X1(m.iconName):{},V=G(m.prefix,m.iconName);v.prefix&&(i=null),m.iconName=v.iconName||V||m.iconName,m.prefix=v.prefix||m.prefix,m.prefix==="far"&&!j.far&&j.fas&&!H.autoFetchSvg&&(m.prefix="fas")}return m},K2());return(c.includes("fa-brands")||c.includes("fab"))&&(l.prefix="fab"),(c.includes("fa-duotone")||c.includes("fad"))&&(l.prefix="fad"),!l.prefix&&n===p&&(j.fass||H.autoFetchSvg)&&(l.prefix="fass",l.iconName=G(l.prefix,l.iconName)||l.iconName),(l.prefix==="fa"||i==="fa")&&(l.prefix=E()||"fas"),l}var s4=function(){function c(){M3(this,c),this.definitions={}}return p3(c,[{key:"add",value:function(){for(var e=this,r=arguments.length,s=new Array(r),f=0;f<r;f++)s[f]=arguments[f];var i=s.reduce(this._pullDefinitions,{});Object.keys(i).forEach(function(n){e.definitions[n]=t(t({},e.definitions[n]||{}),i[n]),F2(n,i[n]);var l=e2[h][n];l&&F2(l,i[n]),j1()})}},{key:"reset",value:function(){this.definitions={}}},{key:"_pullDefinitions",value:function(e,r){var s=r.prefix&&r.iconName&&r.icon?{0:r}:r;return Object.keys(s).map(function(f){var i=s[f],n=i.prefix,l=i.iconName,m=i.icon,o=m[2];e[n]||(e[n]={}),o.length>0&&o.forEach(function(z){typeof z=="string"&&(e[n][z]=m)}),e[n][l]=m}),e}}]),c}(),z1=[],X={},Y={},i4=Object.keys(Y);function f4(c,a){var e=a.mixoutsTo;return z1=c,X={},Object.keys(Y).forEach(function(r){i4.indexOf(r)===-1&&delete Y[r]}),z1.forEach(function(r){var s=r.mixout?r.mixout():{};if(Object.keys(s).forEach(function(i){typeof s[i]=="function"&&(e[i]=s[i]),C2(s[i])==="object"&&Object.keys(s[i]).forEach(function(n){e[i]||(e[i]={}),e[i][n]=s[i][n]})}),r.hooks){var f=r.hooks();Object.keys(f).forEach(function(i){X[i]||(X[i]=[]),X[i].push(f[i])})}r.provides&&r.provides(Y)}),e}function D2(c,a){for(var e=arguments.length,r=new Array(e>2?e-2:0),s=2;s<e;s++)r[s-2]=arguments[s];var f=X[c]||[];return f.forEach(function(i){a=i.apply(null,[a].concat(r))}),a}function _(c){for(var a=arguments.length,e=new Array(a>1?a-1:0),r=1;r<a;r++)e[r-1]=arguments[r];var s=X[c]||[];s.forEach(function(f){f.apply(null,e)})}function T(){var c=arguments[0],a=Array.prototype.slice.call(arguments,1);return Y[c]?Y[c].apply(null,a):void 0}function R2(c){c.prefix==="fa"&&(c.prefix="fas");var a=c.iconName,e=c.prefix||E();if(a)return a=G(e,a)||a,t1(Y1.definitions,e,a)||t1(S.styles,e,a)}var Y1=new s4,n4=function(){H.autoReplaceSvg=!1,H.observeMutations=!1,_("noAuto")},l4={i2svg:function(){var a=arguments.length>0&&arguments[0]!==void 0?arguments[0]:{};return B?(_("beforeI2svg",a),T("pseudoElements2svg",a),T("i2svg",a)):Promise.reject("Operation requires a DOM of some kind.")},watch:function(){var a=arguments.length>0&&arguments[0]!==void 0?arguments[0]:{},e=a.autoReplaceSvgRoot;H.autoReplaceSvg===!1&&(H.autoReplaceSvg=!0),H.observeMutations=!0,X3(function(){t4({autoReplaceSvgRoot:e}),_("watch",a)})}},o4={icon:function(a){if(a===null)return null;if(C2(a)==="object"&&a.prefix&&a.iconName)return{prefix:a.prefix,iconName:G(a.prefix,a.iconName)||a.iconName};if(Array.isArray(a)&&a.length===2){var e=a[1].indexOf("fa-")===0?a[1].slice(3):a[1],r=g2(a[0]);return{prefix:r,iconName:G(r,e)||e}}if(typeof a=="string"&&(a.indexOf("".concat(H.cssPrefix,"-"))>-1||a.match(A3))){var s=x2(a.split(" "),{skipLookups:!0});return{prefix:s.prefix||E(),iconName:G(s.prefix,s.iconName)||s.iconName}}if(typeof a=="string"){var f=E();return{prefix:f,iconName:G(f,a)||a}}}},x={noAuto:n4,config:H,dom:l4,parse:o4,library:Y1,findIconDefinition:R2,toHtml:n2},t4=function(){var a=arguments.length>0&&arguments[0]!==void 0?arguments[0]:{},e=a.autoReplaceSvgRoot,r=e===void 0?M:e;(Object.keys(S.styles).length>0||H.autoFetchSvg)&&B&&H.autoReplaceSvg&&x.dom.i2svg({node:r})};function N2(c,a){return Object.defineProperty(c,"abstract",{get:a}),Object.defineProperty(c,"html",{get:function(){return c.abstract.map(function(r){return n2(r)})}}),Object.defineProperty(c,"node",{get:function(){if(B){var r=M.createElement("div");return r.innerHTML=c.html,r.children}}}),c}function m4(c){var a=c.children,e=c.main,r=c.mask,s=c.attributes,f=c.styles,i=c.transform;if(Y2(i)&&e.found&&!r.found){var n=e.width,l=e.height,m={x:n/l/2,y:.5};s.style=d2(t(t({},f),{},{"transform-origin":"".concat(m.x+i.x/16,"em ").concat(m.y+i.y/16,"em")}))}return[{tag:"svg",attributes:s,children:a}]}function H4(c){var a=c.prefix,e=c.iconName,r=c.children,s=c.attributes,f=c.symbol,i=f===!0?"".concat(a,"-").concat(H.cssPrefix,"-").concat(e):f;return[{tag:"svg",attributes:{style:"display: none;"},children:[{tag:"symbol",attributes:t(t({},s),{},{id:i}),children:r}]}]}function J2(c){var a=c.icons,e=a.main,r=a.mask,s=c.prefix,f=c.iconName,i=c.transform,n=c.symbol,l=c.title,m=c.maskId,o=c.titleId,z=c.extra,v=c.watchable,V=v===void 0?!1:v,L=r.found?r:e,N=L.width,b=L.height,k=s==="fak",u=[H.replacementClass,f?"".concat(H.cssPrefix,"-").concat(f):""].filter(function(F){return z.classes.indexOf(F)===-1}).filter(function(F){return F!==""||!!F}).concat(z.classes).join(" "),d={children:[],attributes:t(t({},z.attributes),{},{"data-prefix":s,"data-icon":f,class:u,role:z.attributes.role||"img",xmlns:"http://www.w3.org/2000/svg",viewBox:"0 0 ".concat(N," ").concat(b)})},w=k&&!~z.classes.indexOf("fa-fw")?{width:"".concat(N/b*16*.0625,"em")}:{};V&&(d.attributes[I]=""),l&&(d.children.push({tag:"title",attributes:{id:d.attributes["aria-labelledby"]||"title-".concat(o||s2())},children:[l]}),delete d.attributes.title);var g=t(t({},d),{},{prefix:s,iconName:f,main:e,mask:r,maskId:m,transform:i,symbol:n,styles:t(t({},w),z.styles)}),q=r.found&&e.found?T("generateAbstractMask",g)||{children:[],attributes:{}}:T("generateAbstractIcon",g)||{children:[],attributes:{}},O=q.children,b2=q.attributes;return g.children=O,g.attributes=b2,n?H4(g):m4(g)}function v1(c){var a=c.content,e=c.width,r=c.height,s=c.transform,f=c.title,i=c.extra,n=c.watchable,l=n===void 0?!1:n,m=t(t(t({},i.attributes),f?{title:f}:{}),{},{class:i.classes.join(" ")});l&&(m[I]="");var o=t({},i.styles);Y2(s)&&(o.transform=G3({transform:s,startCentered:!0,width:e,height:r}),o["-webkit-transform"]=o.transform);var z=d2(o);z.length>0&&(m.style=z);var v=[];return v.push({tag:"span",attributes:m,children:[a]}),f&&v.push({tag:"span",attributes:{class:"sr-only"},children:[f]}),v}function z4(c){var a=c.content,e=c.title,r=c.extra,s=t(t(t({},r.attributes),e?{title:e}:{}),{},{class:r.classes.join(" ")}),f=d2(r.styles);f.length>0&&(s.style=f);var i=[];return i.push({tag:"span",attributes:s,children:[a]}),e&&i.push({tag:"span",attributes:{class:"sr-only"},children:[e]}),i}var w2=S.styles;function E2(c){var a=c[0],e=c[1],r=c.slice(4),s=W2(r,1),f=s[0],i=null;return Array.isArray(f)?i={tag:"g",attributes:{class:"".concat(H.cssPrefix,"-").concat(W.GROUP)},children:[{tag:"path",attributes:{class:"".concat(H.cssPrefix,"-").concat(W.SECONDARY),fill:"currentColor",d:f[0]}},{tag:"path",attributes:{class:"".concat(H.cssPrefix,"-").concat(W.PRIMARY),fill:"currentColor",d:f[1]}}]}:i={tag:"path",attributes:{fill:"currentColor",d:f}},{found:!0,width:a,height:e,icon:i}}var v4={found:!1,width:512,height:512};function V4(c,a){!B1&&!H.showMissingIcons&&c&&console.error('Icon with name "'.concat(c,'" and prefix "').concat(a,'" is missing.'))}function U2(c,a){var e=a;return a==="fa"&&H.styleDefault!==null&&(a=E()),new Promise(function(r,s){var f={found:!1,width:512,height:512,icon:T("missingIconAbstract")||{}};if(e==="fa"){var i=X1(c)||{};c=i.iconName||c,a=i.prefix||a}if(c&&a&&w2[a]&&w2[a][c]){var n=w2[a][c];return r(E2(n))}V4(c,a),r(t(t({},v4),{},{icon:H.showMissingIcons&&c?T("missingIconAbstract")||{}:{}}))})}var V1=function(){},q2=H.measurePerformance&&l2&&l2.mark&&l2.measure?l2:{mark:V1,measure:V1},K='FA "6.5.2"',h4=function(a){return q2.mark("".concat(K," ").concat(a," begins")),function(){return $1(a)}},$1=function(a){q2.mark("".concat(K," ").concat(a," ends")),q2.measure("".concat(K," ").concat(a),"".concat(K," ").concat(a," begins"),"".concat(K," ").concat(a," ends"))},Z2={begin:h4,end:$1},M2=function(){};function h1(c){var a=c.getAttribute?c.getAttribute(I):null;return typeof a=="string"}function M4(c){var a=c.getAttribute?c.getAttribute(I2):null,e=c.getAttribute?c.getAttribute(_2):null;return a&&e}function p4(c){return c&&c.classList&&c.classList.contains&&c.classList.contains(H.replacementClass)}function C4(){if(H.autoReplaceSvg===!0)return p2.replace;var c=p2[H.autoReplaceSvg];return c||p2.replace}function u4(c){return M.createElementNS("http://www.w3.org/2000/svg",c)}function L4(c){return M.createElement(c)}function Q1(c){var a=arguments.length>1&&arguments[1]!==void 0?arguments[1]:{},e=a.ceFn,r=e===void 0?c.tag==="svg"?u4:L4:e;if(typeof c=="string")return M.createTextNode(c);var s=r(c.tag);Object.keys(c.attributes||[]).forEach(function(i){s.setAttribute(i,c.attributes[i])});var f=c.children||[];return f.forEach(function(i){s.appendChild(Q1(i,{ceFn:r}))}),s}function d4(c){var a=" ".concat(c.outerHTML," ");return a="".concat(a,"Font Awesome fontawesome.com "),a}var p2={replace:function(a){var e=a[0];if(e.parentNode)if(a[1].forEach(function(s){e.parentNode.insertBefore(Q1(s),e)}),e.getAttribute(I)===null&&H.keepOriginalSource){var r=M.createComment(d4(e));e.parentNode.replaceChild(r,e)}else e.remove()},nest:function(a){var e=a[0],r=a[1];if(~X2(e).indexOf(H.replacementClass))return p2.replace(a);var s=new RegExp("".concat(H.cssPrefix,"-.*"));if(delete r[0].attributes.id,r[0].attributes.class){var f=r[0].attributes.class.split(" ").reduce(function(n,l){return l===H.replacementClass||l.match(s)?n.toSvg.push(l):n.toNode.push(l),n},{toNode:[],toSvg:[]});r[0].attributes.class=f.toSvg.join(" "),f.toNode.length===0?e.removeAttribute("class"):e.setAttribute("class",f.toNode.join(" "))}var i=r.map(function(n){return n2(n)}).join(`
`);e.setAttribute(I,""),e.innerHTML=i}};function M1(c){c()}function K1(c,a){var e=typeof a=="function"?a:M2;if(c.length===0)e();else{var r=M1;H.mutateApproach===S3&&(r=R.requestAnimationFrame||M1),r(function(){var s=C4(),f=Z2.begin("mutate");c.map(s),f(),e()})}}var c1=!1;function J1(){c1=!0}function O2(){c1=!1}var L2=null;function p1(c){if(f1&&H.observeMutations){var a=c.treeCallback,e=a===void 0?M2:a,r=c.nodeCallback,s=r===void 0?M2:r,f=c.pseudoElementsCallback,i=f===void 0?M2:f,n=c.observeMutationsRoot,l=n===void 0?M:n;L2=new f1(function(m){if(!c1){var o=E();Q(m).forEach(function(z){if(z.type==="childList"&&z.addedNodes.length>0&&!h1(z.addedNodes[0])&&(H.searchPseudoElements&&i(z.target),e(z.target)),z.type==="attributes"&&z.target.parentNode&&H.searchPseudoElements&&i(z.target.parentNode),z.type==="attributes"&&h1(z.target)&&~B3.indexOf(z.attributeName))if(z.attributeName==="class"&&M4(z.target)){var v=x2(X2(z.target)),V=v.prefix,L=v.iconName;z.target.setAttribute(I2,V||o),L&&z.target.setAttribute(_2,L)}else p4(z.target)&&s(z.target)})}}),B&&L2.observe(l,{childList:!0,attributes:!0,characterData:!0,subtree:!0})}}function g4(){L2&&L2.disconnect()}function x4(c){var a=c.getAttribute("style"),e=[];return a&&(e=a.split(";").reduce(function(r,s){var f=s.split(":"),i=f[0],n=f.slice(1);return i&&n.length>0&&(r[i]=n.join(":").trim()),r},{})),e}function N4(c){var a=c.getAttribute("data-prefix"),e=c.getAttribute("data-icon"),r=c.innerText!==void 0?c.innerText.trim():"",s=x2(X2(c));return s.prefix||(s.prefix=E()),a&&e&&(s.prefix=a,s.iconName=e),s.iconName&&s.prefix||(s.prefix&&r.length>0&&(s.iconName=e4(s.prefix,c.innerText)||Q2(s.prefix,B2(c.innerText))),!s.iconName&&H.autoFetchSvg&&c.firstChild&&c.firstChild.nodeType===Node.TEXT_NODE&&(s.iconName=c.firstChild.data)),s}function b4(c){var a=Q(c.attributes).reduce(function(s,f){return s.name!=="class"&&s.name!=="style"&&(s[f.name]=f.value),s},{}),e=c.getAttribute("title"),r=c.getAttribute("data-fa-title-id");return H.autoA11y&&(e?a["aria-labelledby"]="".concat(H.replacementClass,"-title-").concat(r||s2()):(a["aria-hidden"]="true",a.focusable="false")),a}function S4(){return{iconName:null,title:null,titleId:null,prefix:null,transform:A,symbol:!1,mask:{iconName:null,prefix:null,rest:[]},maskId:null,extra:{classes:[],styles:{},attributes:{}}}}function C1(c){var a=arguments.length>1&&arguments[1]!==void 0?arguments[1]:{styleParser:!0},e=N4(c),r=e.iconName,s=e.prefix,f=e.rest,i=b4(c),n=D2("parseNodeAttributes",{},c),l=a.styleParser?x4(c):[];return t({iconName:r,title:c.getAttribute("title"),titleId:c.getAttribute("data-fa-title-id"),prefix:s,transform:A,mask:{iconName:null,prefix:null,rest:[]},maskId:null,symbol:!1,extra:{classes:f,styles:l,attributes:i}},n)}var k4=S.styles;function Z1(c){var a=H.autoReplaceSvg==="nest"?C1(c,{styleParser:!1}):C1(c);return~a.extra.classes.indexOf(F1)?T("generateLayersText",c,a):T("generateSvgReplacementMutation",c,a)}var U=new Set;j2.map(function(c){U.add("fa-".concat(c))});Object.keys(c2[h]).map(U.add.bind(U));Object.keys(c2[p]).map(U.add.bind(U));U=i2(U);function u1(c){var a=arguments.length>1&&arguments[1]!==void 0?arguments[1]:null;if(!B)return Promise.resolve();var e=M.documentElement.classList,r=function(z){return e.add("".concat(n1,"-").concat(z))},s=function(z){return e.remove("".concat(n1,"-").concat(z))},f=H.autoFetchSvg?U:j2.map(function(o){return"fa-".concat(o)}).concat(Object.keys(k4));f.includes("fa")||f.push("fa");var i=[".".concat(F1,":not([").concat(I,"])")].concat(f.map(function(o){return".".concat(o,":not([").concat(I,"])")})).join(", ");if(i.length===0)return Promise.resolve();var n=[];try{n=Q(c.querySelectorAll(i))}catch(o){}if(n.length>0)r("pending"),s("complete");else return Promise.resolve();var l=Z2.begin("onTree"),m=n.reduce(function(o,z){try{var v=Z1(z);v&&o.push(v)}catch(V){B1||V.name==="MissingIcon"&&console.error(V)}return o},[]);return new Promise(function(o,z){Promise.all(m).then(function(v){K1(v,function(){r("active"),r("complete"),s("pending"),typeof a=="function"&&a(),l(),o()})}).catch(function(v){l(),z(v)})})}function w4(c){var a=arguments.length>1&&arguments[1]!==void 0?arguments[1]:null;Z1(c).then(function(e){e&&K1([e],a)})}function A4(c){return function(a){var e=arguments.length>1&&arguments[1]!==void 0?arguments[1]:{},r=(a||{}).icon?a:R2(a||{}),s=e.mask;return s&&(s=(s||{}).icon?s:R2(s||{})),c(r,t(t({},e),{},{mask:s}))}}var y4=function(a){var e=arguments.length>1&&arguments[1]!==void 0?arguments[1]:{},r=e.transform,s=r===void 0?A:r,f=e.symbol,i=f===void 0?!1:f,n=e.mask,l=n===void 0?null:n,m=e.maskId,o=m===void 0?null:m,z=e.title,v=z===void 0?null:z,V=e.titleId,L=V===void 0?null:V,N=e.classes,b=N===void 0?[]:N,k=e.attributes,u=k===void 0?{}:k,d=e.styles,w=d===void 0?{}:d;if(a){var g=a.prefix,q=a.iconName,O=a.icon;return N2(t({type:"icon"},a),function(){return _("beforeDOMElementCreation",{iconDefinition:a,params:e}),H.autoA11y&&(v?u["aria-labelledby"]="".concat(H.replacementClass,"-title-").concat(L||s2()):(u["aria-hidden"]="true",u.focusable="false")),J2({icons:{main:E2(O),mask:l?E2(l.icon):{found:!1,width:null,height:null,icon:{}}},prefix:g,iconName:q,transform:t(t({},A),s),symbol:i,title:v,maskId:o,titleId:L,extra:{attributes:u,styles:w,classes:b}})})}},P4={mixout:function(){return{icon:A4(y4)}},hooks:function(){return{mutationObserverCallbacks:function(e){return e.treeCallback=u1,e.nodeCallback=w4,e}}},provides:function(a){a.i2svg=function(e){var r=e.node,s=r===void 0?M:r,f=e.callback,i=f===void 0?function(){}:f;return u1(s,i)},a.generateSvgReplacementMutation=function(e,r){var s=r.iconName,f=r.title,i=r.titleId,n=r.prefix,l=r.transform,m=r.symbol,o=r.mask,z=r.maskId,v=r.extra;return new Promise(function(V,L){Promise.all([U2(s,n),o.iconName?U2(o.iconName,o.prefix):Promise.resolve({found:!1,width:512,height:512,icon:{}})]).then(function(N){var b=W2(N,2),k=b[0],u=b[1];V([e,J2({icons:{main:k,mask:u},prefix:n,iconName:s,transform:l,symbol:m,maskId:z,title:f,titleId:i,extra:v,watchable:!0})])}).catch(L)})},a.generateAbstractIcon=function(e){var r=e.children,s=e.attributes,f=e.main,i=e.transform,n=e.styles,l=d2(n);l.length>0&&(s.style=l);var m;return Y2(i)&&(m=T("generateAbstractTransformGrouping",{main:f,transform:i,containerWidth:f.width,iconWidth:f.width})),r.push(m||f.icon),{children:r,attributes:s}}}},T4={mixout:function(){return{layer:function(e){var r=arguments.length>1&&arguments[1]!==void 0?arguments[1]:{},s=r.classes,f=s===void 0?[]:s;return N2({type:"layer"},function(){_("beforeDOMElementCreation",{assembler:e,params:r});var i=[];return e(function(n){Array.isArray(n)?n.map(function(l){i=i.concat(l.abstract)}):i=i.concat(n.abstract)}),[{tag:"span",attributes:{class:["".concat(H.cssPrefix,"-layers")].concat(i2(f)).join(" ")},children:i}]})}}}},B4={mixout:function(){return{counter:function(e){var r=arguments.length>1&&arguments[1]!==void 0?arguments[1]:{},s=r.title,f=s===void 0?null:s,i=r.classes,n=i===void 0?[]:i,l=r.attributes,m=l===void 0?{}:l,o=r.styles,z=o===void 0?{}:o;return N2({type:"counter",content:e},function(){return _("beforeDOMElementCreation",{content:e,params:r}),z4({content:e.toString(),title:f,extra:{attributes:m,styles:z,classes:["".concat(H.cssPrefix,"-layers-counter")].concat(i2(n))}})})}}}},F4={mixout:function(){return{text:function(e){var r=arguments.length>1&&arguments[1]!==void 0?arguments[1]:{},s=r.transform,f=s===void 0?A:s,i=r.title,n=i===void 0?null:i,l=r.classes,m=l===void 0?[]:l,o=r.attributes,z=o===void 0?{}:o,v=r.styles,V=v===void 0?{}:v;return N2({type:"text",content:e},function(){return _("beforeDOMElementCreation",{content:e,params:r}),v1({content:e,transform:t(t({},A),f),title:n,extra:{attributes:z,styles:V,classes:["".concat(H.cssPrefix,"-layers-text")].concat(i2(m))}})})}}},provides:function(a){a.generateLayersText=function(e,r){var s=r.title,f=r.transform,i=r.extra,n=null,l=null;if(y1){var m=parseInt(getComputedStyle(e).fontSize,10),o=e.getBoundingClientRect();n=o.width/m,l=o.height/m}return H.autoA11y&&!s&&(i.attributes["aria-hidden"]="true"),Promise.resolve([e,v1({content:e.innerHTML,width:n,height:l,transform:f,title:s,extra:i,watchable:!0})])}}},D4=new RegExp('"',"ug"),L1=[1105920,1112319];function R4(c){var a=c.replace(D4,""),e=Q3(a,0),r=e>=L1[0]&&e<=L1[1],s=a.length===2?a[0]===a[1]:!1;return{value:B2(s?a[0]:a),isSecondary:r||s}}function d1(c,a){var e="".concat(b3).concat(a.replace(":","-"));return new Promise(function(r,s){if(c.getAttribute(e)!==null)return r();var f=Q(c.children),i=f.filter(function(O){return O.getAttribute(T2)===a})[0],n=R.getComputedStyle(c,a),l=n.getPropertyValue("font-family").match(y3),m=n.getPropertyValue("font-weight"),o=n.getPropertyValue("content");if(i&&!l)return c.removeChild(i),r();if(l&&o!=="none"&&o!==""){var z=n.getPropertyValue("content"),v=~["Sharp"].indexOf(l[2])?p:h,V=~["Solid","Regular","Light","Thin","Duotone","Brands","Kit"].indexOf(l[2])?a2[v][l[2].toLowerCase()]:P3[v][m],L=R4(z),N=L.value,b=L.isSecondary,k=l[0].startsWith("FontAwesome"),u=Q2(V,N),d=u;if(k){var w=r4(N);w.iconName&&w.prefix&&(u=w.iconName,V=w.prefix)}if(u&&!b&&(!i||i.getAttribute(I2)!==V||i.getAttribute(_2)!==d)){c.setAttribute(e,d),i&&c.removeChild(i);var g=S4(),q=g.extra;q.attributes[T2]=a,U2(u,V).then(function(O){var b2=J2(t(t({},g),{},{icons:{main:O,mask:K2()},prefix:V,iconName:d,extra:q,watchable:!0})),F=M.createElementNS("http://www.w3.org/2000/svg","svg");a==="::before"?c.insertBefore(F,c.firstChild):c.appendChild(F),F.outerHTML=b2.map(function(h3){return n2(h3)}).join(`
`),c.removeAttribute(e),r()}).catch(s)}else r()}else r()})}function E4(c){return Promise.all([d1(c,"::before"),d1(c,"::after")])}function U4(c){return c.parentNode!==document.head&&!~k3.indexOf(c.tagName.toUpperCase())&&!c.getAttribute(T2)&&(!c.parentNode||c.parentNode.tagName!=="svg")}function g1(c){if(B)return new Promise(function(a,e){var r=Q(c.querySelectorAll("*")).filter(U4).map(E4),s=Z2.begin("searchPseudoElements");J1(),Promise.all(r).then(function(){s(),O2(),a()}).catch(function(){s(),O2(),e()})})}var q4={hooks:function(){return{mutationObserverCallbacks:function(e){return e.pseudoElementsCallback=g1,e}}},provides:function(a){a.pseudoElements2svg=function(e){var r=e.node,s=r===void 0?M:r;H.searchPseudoElements&&g1(s)}}},x1=!1,O4={mixout:function(){return{dom:{unwatch:function(){J1(),x1=!0}}}},hooks:function(){return{bootstrap:function(){p1(D2("mutationObserverCallbacks",{}))},noAuto:function(){g4()},watch:function(e){var r=e.observeMutationsRoot;x1?O2():p1(D2("mutationObserverCallbacks",{observeMutationsRoot:r}))}}}},N1=function(a){var e={size:16,x:0,y:0,flipX:!1,flipY:!1,rotate:0};return a.toLowerCase().split(" ").reduce(function(r,s){var f=s.toLowerCase().split("-"),i=f[0],n=f.slice(1).join("-");if(i&&n==="h")return r.flipX=!0,r;if(i&&n==="v")return r.flipY=!0,r;if(n=parseFloat(n),isNaN(n))return r;switch(i){case"grow":r.size=r.size+n;break;case"shrink":r.size=r.size-n;break;case"left":r.x=r.x-n;break;case"right":r.x=r.x+n;break;case"up":r.y=r.y-n;break;case"down":r.y=r.y+n;break;case"rotate":r.rotate=r.rotate+n;break}return r},e)},W4={mixout:function(){return{parse:{transform:function(e){return N1(e)}}}},hooks:function(){return{parseNodeAttributes:function(e,r){var s=r.getAttribute("data-fa-transform");return s&&(e.transform=N1(s)),e}}},provides:function(a){a.generateAbstractTransformGrouping=function(e){var r=e.main,s=e.transform,f=e.containerWidth,i=e.iconWidth,n={transform:"translate(".concat(f/2," 256)")},l="translate(".concat(s.x*32,", ").concat(s.y*32,") "),m="scale(".concat(s.size/16*(s.flipX?-1:1),", ").concat(s.size/16*(s.flipY?-1:1),") "),o="rotate(".concat(s.rotate," 0 0)"),z={transform:"".concat(l," ").concat(m," ").concat(o)},v={transform:"translate(".concat(i/2*-1," -256)")},V={outer:n,inner:z,path:v};return{tag:"g",attributes:t({},V.outer),children:[{tag:"g",attributes:t({},V.inner),children:[{tag:r.icon.tag,children:r.icon.children,attributes:t(t({},r.icon.attributes),V.path)}]}]}}}},A2={x:0,y:0,width:"100%",height:"100%"};function b1(c){var a=arguments.length>1&&arguments[1]!==void 0?arguments[1]:!0;return c.attributes&&(c.attributes.fill||a)&&(c.attributes.fill="black"),c}function G4(c){return c.tag==="g"?c.children:[c]}var I4={hooks:function(){return{parseNodeAttributes:function(e,r){var s=r.getAttribute("data-fa-mask"),f=s?x2(s.split(" ").map(function(i){return i.trim()})):K2();return f.prefix||(f.prefix=E()),e.mask=f,e.maskId=r.getAttribute("data-fa-mask-id"),e}}},provides:function(a){a.generateAbstractMask=function(e){var r=e.children,s=e.attributes,f=e.main,i=e.mask,n=e.maskId,l=e.transform,m=f.width,o=f.icon,z=i.width,v=i.icon,V=W3({transform:l,containerWidth:z,iconWidth:m}),L={tag:"rect",attributes:t(t({},A2),{},{fill:"white"})},N=o.children?{children:o.children.map(b1)}:{},b={tag:"g",attributes:t({},V.inner),children:[b1(t({tag:o.tag,attributes:t(t({},o.attributes),V.path)},N))]},k={tag:"g",attributes:t({},V.outer),children:[b]},u="mask-".concat(n||s2()),d="clip-".concat(n||s2()),w={tag:"mask",attributes:t(t({},A2),{},{id:u,maskUnits:"userSpaceOnUse",maskContentUnits:"userSpaceOnUse"}),children:[L,k]},g={tag:"defs",children:[{tag:"clipPath",attributes:{id:d},children:G4(v)},w]};return r.push(g,{tag:"rect",attributes:t({fill:"currentColor","clip-path":"url(#".concat(d,")"),mask:"url(#".concat(u,")")},A2)}),{children:r,attributes:s}}}},_4={provides:function(a){var e=!1;R.matchMedia&&(e=R.matchMedia("(prefers-reduced-motion: reduce)").matches),a.missingIconAbstract=function(){var r=[],s={fill:"currentColor"},f={attributeType:"XML",repeatCount:"indefinite",dur:"2s"};r.push({tag:"path",attributes:t(t({},s),{},{d:"M156.5,447.7l-12.6,29.5c-18.7-9.5-35.9-21.2-51.5-34.9l22.7-22.7C127.6,430.5,141.5,440,156.5,447.7z M40.6,272H8.5 c1.4,21.2,5.4,41.7,11.7,61.1L50,321.2C45.1,305.5,41.8,289,40.6,272z M40.6,240c1.4-18.8,5.2-37,11.1-54.1l-29.5-12.6 C14.7,194.3,10,216.7,8.5,240H40.6z M64.3,156.5c7.8-14.9,17.2-28.8,28.1-41.5L69.7,92.3c-13.7,15.6-25.5,32.8-34.9,51.5 L64.3,156.5z M397,419.6c-13.9,12-29.4,22.3-46.1,30.4l11.9,29.8c20.7-9.9,39.8-22.6,56.9-37.6L397,419.6z M115,92.4 c13.9-12,29.4-22.3,46.1-30.4l-11.9-29.8c-20.7,9.9-39.8,22.6-56.8,37.6L115,92.4z M447.7,355.5c-7.8,14.9-17.2,28.8-28.1,41.5 l22.7,22.7c13.7-15.6,25.5-32.9,34.9-51.5L447.7,355.5z M471.4,272c-1.4,18.8-5.2,37-11.1,54.1l29.5,12.6 c7.5-21.1,12.2-43.5,13.6-66.8H471.4z M321.2,462c-15.7,5-32.2,8.2-49.2,9.4v32.1c21.2-1.4,41.7-5.4,61.1-11.7L321.2,462z M240,471.4c-18.8-1.4-37-5.2-54.1-11.1l-12.6,29.5c21.1,7.5,43.5,12.2,66.8,13.6V471.4z M462,190.8c5,15.7,8.2,32.2,9.4,49.2h32.1 c-1.4-21.2-5.4-41.7-11.7-61.1L462,190.8z M92.4,397c-12-13.9-22.3-29.4-30.4-46.1l-29.8,11.9c9.9,20.7,22.6,39.8,37.6,56.9 L92.4,397z M272,40.6c18.8,1.4,36.9,5.2,54.1,11.1l12.6-29.5C317.7,14.7,295.3,10,272,8.5V40.6z M190.8,50 c15.7-5,32.2-8.2,49.2-9.4V8.5c-21.2,1.4-41.7,5.4-61.1,11.7L190.8,50z M442.3,92.3L419.6,115c12,13.9,22.3,29.4,30.5,46.1 l29.8-11.9C470,128.5,457.3,109.4,442.3,92.3z M397,92.4l22.7-22.7c-15.6-13.7-32.8-25.5-51.5-34.9l-12.6,29.5 C370.4,72.1,384.4,81.5,397,92.4z"})});var i=t(t({},f),{},{attributeName:"opacity"}),n={tag:"circle",attributes:t(t({},s),{},{cx:"256",cy:"364",r:"28"}),children:[]};return e||n.children.push({tag:"animate",attributes:t(t({},f),{},{attributeName:"r",values:"28;14;28;28;14;28;"})},{tag:"animate",attributes:t(t({},i),{},{values:"1;0;1;1;0;1;"})}),r.push(n),r.push({tag:"path",attributes:t(t({},s),{},{opacity:"1",d:"M263.7,312h-16c-6.6,0-12-5.4-12-12c0-71,77.4-63.9,77.4-107.8c0-20-17.8-40.2-57.4-40.2c-29.1,0-44.3,9.6-59.2,28.7 c-3.9,5-11.1,6-16.2,2.4l-13.1-9.2c-5.6-3.9-6.9-11.8-2.6-17.2c21.2-27.2,46.4-44.7,91.2-44.7c52.3,0,97.4,29.8,97.4,80.2 c0,67.6-77.4,63.5-77.4,107.8C275.7,306.6,270.3,312,263.7,312z"}),children:e?[]:[{tag:"animate",attributes:t(t({},i),{},{values:"1;0;0;0;0;1;"})}]}),e||r.push({tag:"path",attributes:t(t({},s),{},{opacity:"0",d:"M232.5,134.5l7,168c0.3,6.4,5.6,11.5,12,11.5h9c6.4,0,11.7-5.1,12-11.5l7-168c0.3-6.8-5.2-12.5-12-12.5h-23 C237.7,122,232.2,127.7,232.5,134.5z"}),children:[{tag:"animate",attributes:t(t({},i),{},{values:"0;0;1;1;0;0;"})}]}),{tag:"g",attributes:{class:"missing"},children:r}}}},j4={hooks:function(){return{parseNodeAttributes:function(e,r){var s=r.getAttribute("data-fa-symbol"),f=s===null?!1:s===""?!0:s;return e.symbol=f,e}}}},X4=[_3,P4,T4,B4,F4,q4,O4,W4,I4,_4,j4];f4(X4,{mixoutsTo:x});var $4=x.noAuto,Q4=x.config,c3=x.library,a3=x.dom,K4=x.parse,J4=x.findIconDefinition,Z4=x.toHtml,c6=x.icon,a6=x.layer,e6=x.text,r6=x.counter;var e3={prefix:"fas",iconName:"bars",icon:[448,512,["navicon"],"f0c9","M0 96C0 78.3 14.3 64 32 64H416c17.7 0 32 14.3 32 32s-14.3 32-32 32H32C14.3 128 0 113.7 0 96zM0 256c0-17.7 14.3-32 32-32H416c17.7 0 32 14.3 32 32s-14.3 32-32 32H32c-17.7 0-32-14.3-32-32zM448 416c0 17.7-14.3 32-32 32H32c-17.7 0-32-14.3-32-32s14.3-32 32-32H416c17.7 0 32 14.3 32 32z"]};var r3={prefix:"fas",iconName:"list",icon:[512,512,["list-squares"],"f03a","M40 48C26.7 48 16 58.7 16 72v48c0 13.3 10.7 24 24 24H88c13.3 0 24-10.7 24-24V72c0-13.3-10.7-24-24-24H40zM192 64c-17.7 0-32 14.3-32 32s14.3 32 32 32H480c17.7 0 32-14.3 32-32s-14.3-32-32-32H192zm0 160c-17.7 0-32 14.3-32 32s14.3 32 32 32H480c17.7 0 32-14.3 32-32s-14.3-32-32-32H192zm0 160c-17.7 0-32 14.3-32 32s14.3 32 32 32H480c17.7 0 32-14.3 32-32s-14.3-32-32-32H192zM16 232v48c0 13.3 10.7 24 24 24H88c13.3 0 24-10.7 24-24V232c0-13.3-10.7-24-24-24H40c-13.3 0-24 10.7-24 24zM40 368c-13.3 0-24 10.7-24 24v48c0 13.3 10.7 24 24 24H88c13.3 0 24-10.7 24-24V392c0-13.3-10.7-24-24-24H40z"]};var s3={prefix:"fas",iconName:"angle-right",icon:[320,512,[8250],"f105","M278.6 233.4c12.5 12.5 12.5 32.8 0 45.3l-160 160c-12.5 12.5-32.8 12.5-45.3 0s-12.5-32.8 0-45.3L210.7 256 73.4 118.6c-12.5-12.5-12.5-32.8 0-45.3s32.8-12.5 45.3 0l160 160z"]};var i3={prefix:"fas",iconName:"file-pdf",icon:[512,512,[],"f1c1","M0 64C0 28.7 28.7 0 64 0L224 0l0 128c0 17.7 14.3 32 32 32l128 0 0 144-208 0c-35.3 0-64 28.7-64 64l0 144-48 0c-35.3 0-64-28.7-64-64L0 64zm384 64l-128 0L256 0 384 128zM176 352l32 0c30.9 0 56 25.1 56 56s-25.1 56-56 56l-16 0 0 32c0 8.8-7.2 16-16 16s-16-7.2-16-16l0-48 0-80c0-8.8 7.2-16 16-16zm32 80c13.3 0 24-10.7 24-24s-10.7-24-24-24l-16 0 0 48 16 0zm96-80l32 0c26.5 0 48 21.5 48 48l0 64c0 26.5-21.5 48-48 48l-32 0c-8.8 0-16-7.2-16-16l0-128c0-8.8 7.2-16 16-16zm32 128c8.8 0 16-7.2 16-16l0-64c0-8.8-7.2-16-16-16l-16 0 0 96 16 0zm80-112c0-8.8 7.2-16 16-16l48 0c8.8 0 16 7.2 16 16s-7.2 16-16 16l-32 0 0 32 32 0c8.8 0 16 7.2 16 16s-7.2 16-16 16l-32 0 0 48c0 8.8-7.2 16-16 16s-16-7.2-16-16l0-64 0-64z"]};var f3={prefix:"fas",iconName:"download",icon:[512,512,[],"f019","M288 32c0-17.7-14.3-32-32-32s-32 14.3-32 32V274.7l-73.4-73.4c-12.5-12.5-32.8-12.5-45.3 0s-12.5 32.8 0 45.3l128 128c12.5 12.5 32.8 12.5 45.3 0l128-128c12.5-12.5 12.5-32.8 0-45.3s-32.8-12.5-45.3 0L288 274.7V32zM64 352c-35.3 0-64 28.7-64 64v32c0 35.3 28.7 64 64 64H448c35.3 0 64-28.7 64-64V416c0-35.3-28.7-64-64-64H346.5l-45.3 45.3c-25 25-65.5 25-90.5 0L165.5 352H64zm368 56a24 24 0 1 1 0 48 24 24 0 1 1 0-48z"]};var n3={prefix:"fas",iconName:"outdent",icon:[448,512,["dedent"],"f03b","M0 64C0 46.3 14.3 32 32 32H416c17.7 0 32 14.3 32 32s-14.3 32-32 32H32C14.3 96 0 81.7 0 64zM192 192c0-17.7 14.3-32 32-32H416c17.7 0 32 14.3 32 32s-14.3 32-32 32H224c-17.7 0-32-14.3-32-32zm32 96H416c17.7 0 32 14.3 32 32s-14.3 32-32 32H224c-17.7 0-32-14.3-32-32s14.3-32 32-32zM0 448c0-17.7 14.3-32 32-32H416c17.7 0 32 14.3 32 32s-14.3 32-32 32H32c-17.7 0-32-14.3-32-32zM.2 268.6c-8.2-6.4-8.2-18.9 0-25.3l101.9-79.3c10.5-8.2 25.8-.7 25.8 12.6V335.3c0 13.3-15.3 20.8-25.8 12.6L.2 268.6z"]};var l3={prefix:"fas",iconName:"sun",icon:[512,512,[9728],"f185","M361.5 1.2c5 2.1 8.6 6.6 9.6 11.9L391 121l107.9 19.8c5.3 1 9.8 4.6 11.9 9.6s1.5 10.7-1.6 15.2L446.9 256l62.3 90.3c3.1 4.5 3.7 10.2 1.6 15.2s-6.6 8.6-11.9 9.6L391 391 371.1 498.9c-1 5.3-4.6 9.8-9.6 11.9s-10.7 1.5-15.2-1.6L256 446.9l-90.3 62.3c-4.5 3.1-10.2 3.7-15.2 1.6s-8.6-6.6-9.6-11.9L121 391 13.1 371.1c-5.3-1-9.8-4.6-11.9-9.6s-1.5-10.7 1.6-15.2L65.1 256 2.8 165.7c-3.1-4.5-3.7-10.2-1.6-15.2s6.6-8.6 11.9-9.6L121 121 140.9 13.1c1-5.3 4.6-9.8 9.6-11.9s10.7-1.5 15.2 1.6L256 65.1 346.3 2.8c4.5-3.1 10.2-3.7 15.2-1.6zM160 256a96 96 0 1 1 192 0 96 96 0 1 1 -192 0zm224 0a128 128 0 1 0 -256 0 128 128 0 1 0 256 0z"]};var o3={prefix:"fas",iconName:"file",icon:[384,512,[128196,128459,61462],"f15b","M0 64C0 28.7 28.7 0 64 0H224V128c0 17.7 14.3 32 32 32H384V448c0 35.3-28.7 64-64 64H64c-35.3 0-64-28.7-64-64V64zm384 64H256V0L384 128z"]};var t3={prefix:"fas",iconName:"magnifying-glass",icon:[512,512,[128269,"search"],"f002","M416 208c0 45.9-14.9 88.3-40 122.7L502.6 457.4c12.5 12.5 12.5 32.8 0 45.3s-32.8 12.5-45.3 0L330.7 376c-34.4 25.2-76.8 40-122.7 40C93.1 416 0 322.9 0 208S93.1 0 208 0S416 93.1 416 208zM208 352a144 144 0 1 0 0-288 144 144 0 1 0 0 288z"]};var m3={prefix:"fas",iconName:"arrow-up",icon:[384,512,[8593],"f062","M214.6 41.4c-12.5-12.5-32.8-12.5-45.3 0l-160 160c-12.5 12.5-12.5 32.8 0 45.3s32.8 12.5 45.3 0L160 141.2V448c0 17.7 14.3 32 32 32s32-14.3 32-32V141.2L329.4 246.6c12.5 12.5 32.8 12.5 45.3 0s12.5-32.8 0-45.3l-160-160z"]};var H3={prefix:"fas",iconName:"circle-half-stroke",icon:[512,512,[9680,"adjust"],"f042","M448 256c0-106-86-192-192-192V448c106 0 192-86 192-192zM0 256a256 256 0 1 1 512 0A256 256 0 1 1 0 256z"]};var z3={prefix:"fas",iconName:"expand",icon:[448,512,[],"f065","M32 32C14.3 32 0 46.3 0 64v96c0 17.7 14.3 32 32 32s32-14.3 32-32V96h64c17.7 0 32-14.3 32-32s-14.3-32-32-32H32zM64 352c0-17.7-14.3-32-32-32s-32 14.3-32 32v96c0 17.7 14.3 32 32 32h96c17.7 0 32-14.3 32-32s-14.3-32-32-32H64V352zM320 32c-17.7 0-32 14.3-32 32s14.3 32 32 32h64v64c0 17.7 14.3 32 32 32s32-14.3 32-32V64c0-17.7-14.3-32-32-32H320zM448 352c0-17.7-14.3-32-32-32s-32 14.3-32 32v64H320c-17.7 0-32 14.3-32 32s14.3 32 32 32h96c17.7 0 32-14.3 32-32V352z"]};var v3={prefix:"fas",iconName:"moon",icon:[384,512,[127769,9214],"f186","M223.5 32C100 32 0 132.3 0 256S100 480 223.5 480c60.6 0 115.5-24.2 155.8-63.4c5-4.9 6.3-12.5 3.1-18.7s-10.1-9.7-17-8.5c-9.8 1.7-19.8 2.6-30.1 2.6c-96.9 0-175.5-78.8-175.5-176c0-65.8 36-123.1 89.3-153.3c6.1-3.5 9.2-10.5 7.7-17.3s-7.3-11.9-14.3-12.5c-6.3-.5-12.6-.8-19-.8z"]};var V3={prefix:"fas",iconName:"angle-left",icon:[320,512,[8249],"f104","M41.4 233.4c-12.5 12.5-12.5 32.8 0 45.3l160 160c12.5 12.5 32.8 12.5 45.3 0s12.5-32.8 0-45.3L109.3 256 246.6 118.6c12.5-12.5 12.5-32.8 0-45.3s-32.8-12.5-45.3 0l-160 160z"]};c3.add(V3,s3,m3,e3,H3,f3,z3,o3,i3,r3,t3,v3,n3,l3);a3.watch();})();
